// The page's table view: the paper's table of all 2-bit significand
// additions (Qiu & Yao, section 3.3.2), replayed on bf16 values as `bitexact
// demo` does: fp32 (-1.00000aa + residue) + (-1.00000bb), rounded to bf16.
// The page chooses the residue (the sticky bits an fp32 accumulator carries
// below bf16's last place, or none) and the rounding mode of the store.
#include <emscripten/emscripten.h>

#include <cmath>
#include <string>

#include <fmt/format.h>

#include <bitexact/core/operations.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/render.hpp>

#include "json_text.hpp"

namespace bitexact::web {
namespace {

std::string binary_of(unsigned x, int width) {
  std::string s;
  for (int i = width - 1; i >= 0; --i) s += ((x >> i) & 1) ? '1' : '0';
  return s;
}

// -2^-residue_exponent, or zero for residue_exponent 0 (no residue). Both
// additions are exact for residue exponents up to 22: the sum, in [2, 4),
// keeps fp32's places down to 2^-22.
float32 residue_of(int residue_exponent) {
  return residue_exponent == 0 ? float32::zero() : from_host(-std::ldexp(1.0f, -residue_exponent));
}

struct table_row {
  float32 accumulated, sum;
  rounded<bf16> stored;
  trace store_record;  // the store's guard, round and sticky bits
};

table_row replay(unsigned a, unsigned b, int residue_exponent, const environment& store) {
  const bfloat16 x = bfloat16::from_bits(0xBF80u | a), y = bfloat16::from_bits(0xBF80u | b);
  table_row row;
  row.accumulated = add<fp32>(x, residue_of(residue_exponent)).result;
  row.sum = add<fp32>(row.accumulated, y).result;
  trace_recorder recorder;
  row.stored = convert<bf16>(row.sum, store, recorder);
  row.store_record = recorder.take();
  return row;
}

int bit_of(const table_row& row, bool rounding_event::*which) {
  return row.store_record.rounding && (*row.store_record.rounding).*which ? 1 : 0;
}

std::string table_json(int residue_exponent, rounding_mode mode) {
  std::string rows;
  int ones = 0, count = 0, up = 0, ones_rounded_up = 0;
  for (unsigned a = 0; a < 4; ++a) {
    for (unsigned b = a; b < 4; ++b) {
      const table_row row = replay(a, b, residue_exponent, environment{mode});
      const unsigned s = a + b;
      const double stored = std::fabs(to_double(row.stored.result)), sum = std::fabs(to_double(row.sum));
      const char* direction = stored > sum ? "up (more negative)" : stored < sum ? "down (toward zero)" : "exact";
      const std::string sum_bits = binary_of(s, s >= 4 ? 3 : 2);
      rows += fmt::format(
          "{}{{\"a\": {}, \"b\": {}, \"aa\": \"{}\", \"bb\": \"{}\", \"sum\": \"{}\", \"rounding_bit\": {}, "
          "\"fp32_sum\": \"0x{:08X}\", \"bf16\": \"0x{:04X}\", \"direction\": \"{}\", \"guard\": {}, \"round\": {}, "
          "\"sticky\": {}}}",
          rows.empty() ? "" : ", ", a, b, binary_of(a, 2), binary_of(b, 2),
          sum_bits.substr(0, sum_bits.size() - 1) + "[" + sum_bits.back() + "]", s & 1, row.sum.bits,
          row.stored.result.bits, direction, bit_of(row, &rounding_event::guard), bit_of(row, &rounding_event::round),
          bit_of(row, &rounding_event::sticky));
      ones += s & 1;
      up += stored > sum;
      ones_rounded_up += (s & 1) && stored > sum;
      ++count;
    }
  }
  return fmt::format(
      "{{\"rows\": [{}], \"summary\": \"{} of {} rows shift out a 1, and {} of those round up ({} round-ups in all)\"}}",
      rows, ones, count, ones_rounded_up, up);
}

// The row's two roundings traced: the fp32 addition (exact here) and the store to bf16.
std::string row_traces_json(unsigned a, unsigned b, int residue_exponent, rounding_mode mode) {
  const table_row row = replay(a, b, residue_exponent, environment{mode});
  const bfloat16 y = bfloat16::from_bits(0xBF80u | b);
  trace_recorder addition;
  add<fp32>(row.accumulated, y, environment{}, addition);
  return fmt::format("{{\"addition\": {}, \"store\": {}}}", trace_json(addition.take()), trace_json(row.store_record));
}

bool valid(unsigned a, unsigned b, int residue_exponent) {
  return a < 4 && b < 4 && (residue_exponent == 0 || (residue_exponent >= 8 && residue_exponent <= 22));
}

}  // namespace
}  // namespace bitexact::web

extern "C" {

// residue_exponent: the accumulator's residue is -2^-residue_exponent (8 to 22;
// `bitexact demo` uses 12), or none for 0. rounding: the store's mode.
EMSCRIPTEN_KEEPALIVE const char* bitexact_two_bit_table(int residue_exponent, const char* rounding) {
  using namespace bitexact;
  const auto mode = rounding_mode_from_name(rounding);
  if (!mode || *mode == rounding_mode::stochastic || !web::valid(0, 0, residue_exponent))
    return web::handed_to_javascript(web::error_json("bitexact_two_bit_table: a deterministic rounding mode and a residue exponent 0 or 8..22"));
  return web::handed_to_javascript(web::table_json(residue_exponent, *mode));
}

EMSCRIPTEN_KEEPALIVE const char* bitexact_two_bit_traces(int a, int b, int residue_exponent, const char* rounding) {
  using namespace bitexact;
  const auto mode = rounding_mode_from_name(rounding);
  if (!mode || *mode == rounding_mode::stochastic || a < 0 || b < 0 ||
      !web::valid(static_cast<unsigned>(a), static_cast<unsigned>(b), residue_exponent))
    return web::handed_to_javascript(web::error_json("bitexact_two_bit_traces: a, b in 0..3, a deterministic mode, a residue exponent 0 or 8..22"));
  return web::handed_to_javascript(
      web::row_traces_json(static_cast<unsigned>(a), static_cast<unsigned>(b), residue_exponent, *mode));
}

}
