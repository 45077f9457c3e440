// `bitexact attention --explain`: one element of O as the model computed
// it, its row block by block and every rounding (attention/explain.hpp).
#include <bitexact/hardware/alu.hpp>
#include <bitexact/trace/render.hpp>

#include "attention.hpp"

namespace bitexact::cli::attention_parts {

// --explain's b,h,row,col (or row,col for [N, d] files), each within the shape.
element_index parse_element_index(std::string_view text, const operand_tensor& q, bool four_d) {
  const std::vector<std::size_t> extents =
      four_d ? std::vector<std::size_t>{q.batch, q.heads, q.rows, q.head_dim} : std::vector<std::size_t>{q.rows, q.head_dim};
  const std::string_view form = four_d ? "b,h,row,col" : "row,col";
  const std::vector<std::string_view> fields = split_list(text);
  std::vector<std::size_t> index;
  for (std::size_t i = 0; i < fields.size() && fields.size() == extents.size(); ++i)
    if (const auto parsed = integer_in<std::size_t>(fields[i], 0, extents[i] - 1); parsed && extents[i] > 0)
      index.push_back(*parsed);
  if (index.size() != extents.size())
    fail(fmt::format("attention: --explain expects {} within Q's shape {}, not {}", form, shape_text(q.file_shape),
                     quoted_input(text)));
  if (!four_d) return {0, index[0], index[1]};
  return {index[0] * q.heads + index[1], index[2], index[3]};
}

// Where a row's result comes from: its block of rows, and the K/V blocks each split ran for it.
std::string describe_row(const attention_problem& p, std::size_t row) {
  const flash_kernel& kernel = p.kernel();
  const attention_shape& shape = p.call.head;
  const int m_block = static_cast<int>(row) / kernel.block_m;
  const int key_blocks = (shape.key_rows + kernel.block_n - 1) / kernel.block_n;
  std::string text = fmt::format("  row {}: row block {} (rows {}..{}); {} K/V block{} of {} keys", row, m_block,
                                 m_block * kernel.block_m, std::min((m_block + 1) * kernel.block_m, shape.query_rows) - 1,
                                 key_blocks, key_blocks == 1 ? "" : "s", kernel.block_n);
  if (shape.causal) {
    const long last_key = static_cast<long>(attention::visible_keys(kernel, shape, static_cast<int>(row))) - 1;
    text += last_key < 0 ? "; causal: the row sees no key"
                         : fmt::format("; causal: the row sees keys 0..{}, its diagonal in block {}", last_key,
                                       last_key / kernel.block_n);
  }
  text += "\n";
  // Each split runs its blocks from the last down (flash_forward.hpp).
  constexpr int shown_splits = 8;
  for (int s = 0; s < kernel.splits && s < shown_splits; ++s) {
    const attention::block_range range = attention::blocks_of(kernel, shape, m_block, s);
    text += kernel.splits > 1 ? fmt::format("    split {} of {}: ", s, kernel.splits) : std::string("    one pass: ");
    if (range.first >= range.end) {
      text += "no blocks (an empty split)\n";
      continue;
    }
    const int last_key = std::min(range.end * kernel.block_n, shape.key_rows) - 1;
    text += range.end - range.first == 1
                ? fmt::format("block {} (keys {}..{})\n", range.first, range.first * kernel.block_n, last_key)
                : fmt::format("blocks {} down to {} (keys {}..{})\n", range.end - 1, range.first,
                              range.first * kernel.block_n, last_key);
  }
  if (kernel.splits > shown_splits) text += fmt::format("    ... and {} more splits\n", kernel.splits - shown_splits);
  if (kernel.splits > 1) text += fmt::format("    then the combine kernel merged the {} splits' O and L\n", kernel.splits);
  return text;
}

// An element's index as NumPy writes it, with the axes named.
std::string index_text(const attention_problem& p, std::size_t head, std::size_t row, std::optional<std::size_t> col) {
  const std::size_t b = head / p.q.heads, h = head % p.q.heads;
  if (p.four_d)
    return col ? fmt::format("[{}, {}, {}, {}] (b, h, row, col)", b, h, row, *col)
               : fmt::format("[{}, {}, {}] (b, h, row)", b, h, row);
  return col ? fmt::format("[{}, {}] (row, col)", row, *col) : fmt::format("[{}] (row)", row);
}

// A float32 as bits and its shortest decimal.
std::string short_text(float32 x) { return fmt::format("0x{:08X} ({})", x.bits, to_host(x)); }

// A step's rounding error in units of its result's last place (of the result's format).
std::string error_text(const trace& t) {
  if (!t.error || !t.result_value) return "-";
  const double error = t.error->convert_to<double>();
  if (error == 0.0) return "0 (exact)";
  const double result = std::fabs(t.result_value->convert_to<double>());
  const format f = t.result_format;
  const int least_exponent = 1 - f.bias() - f.fraction_bits;  // the smallest subnormal's
  const int exponent = result == 0.0 ? least_exponent : std::max(std::ilogb(result) - f.fraction_bits, least_exponent);
  return fmt::format("{:.3g} ({:+.3f} ulp)", error, std::ldexp(error, -exponent));
}

std::string_view step_name(attention::traced_step::kind what) {
  using kind = attention::traced_step::kind;
  switch (what) {
    case kind::rescale: return "O * alpha";
    case kind::tensor_core: return "tensor-core step";
    case kind::block_add: return "O + block's P V";
    case kind::normalize: return "O * (1/l)";
    case kind::combine: return "combine fma";
    case kind::to_bf16: return "cvt to bf16";
  }
  return "";
}

// The float32 values before the final conversion that give `expected` (the
// file's value), and where the model's value lies against them.
std::string conversion_window(float32 model, bfloat16 expected) {
  const float target = to_host(float32::from_bits(std::uint32_t{expected.bits} << 16));
  if (std::isnan(target) || std::isnan(to_host(model))) return "";
  float low = target, high = target;
  constexpr int most_steps = 1 << 17;  // a bf16 ulp is 2^16 float32 ulps
  for (int i = 0; i < most_steps && ptx::cvt_rn_bf16_f32(from_host(std::nextafter(low, -INFINITY))).bits == expected.bits; ++i)
    low = std::nextafter(low, -INFINITY);
  for (int i = 0; i < most_steps && ptx::cvt_rn_bf16_f32(from_host(std::nextafter(high, INFINITY))).bits == expected.bits; ++i)
    high = std::nextafter(high, INFINITY);
  const float x = to_host(model);
  const std::string range = fmt::format("  the file's bf16 value is what float32 values from {} to {} convert to; the "
                                        "model's value before the conversion, {}, ", low, high, x);
  if (x >= low && x <= high) return range + "lies among them\n";
  const float nearest = x < low ? low : high;
  long steps = 0;
  for (float y = x; y != nearest && steps < (1L << 24); ++steps) y = std::nextafter(y, nearest);
  // In bf16 ulps too, the unit of the comparison, at the boundary the value missed.
  const double bf16_ulps = std::fabs(double{nearest} - double{x}) / std::ldexp(1.0, std::ilogb(nearest) - 7);
  return range + fmt::format("lies {}{} float32 ulp{} ({:.3g} bf16 ulp) {} them\n", steps >= (1L << 24) ? "more than " : "",
                             steps, steps == 1 ? "" : "s", bf16_ulps, x < low ? "below" : "above");
}

// How the model computed O[row][col] of one head: the row block by block, then
// every rounding of the element (attention/explain.hpp), the largest and the last in full.
void print_explanation(const attention_problem& p, const element_index& at, std::optional<bfloat16> expected) {
  attention::row_record record;
  attention::element_trace element;
  try {
    with_head(p, at.head, [&](auto q, auto k, auto v) {
      record = attention::record_row(p.kernel(), p.call.head, q, k, v, static_cast<int>(at.row));
      element = attention::trace_output_element(p.kernel(), p.call.head, record, v, static_cast<int>(at.col));
    });
  } catch (const std::exception& e) {
    fail("attention: " + printable(e.what()));
  }
  const bool fp8 = p.q.fp8();
  const bool p_bar_sums = p.kernel().row_sum == attention::row_sum_rule::thread_partials_of_p_bar;
  // An fp8 kernel's largest P-bar: the row max's, e4m3(RN(1 * scale_s)).
  const float8_e4m3 p_bar_max = ptx::cvt_rn_satfinite_e4m3_f32(p.kernel().p_scale);
  std::printf("\nO%s = %s, as the model computed it\n", index_text(p, at.head, at.row, at.col).c_str(),
              value_text(record.o[at.col]).c_str());
  const int splits = static_cast<int>(record.splits.size());
  for (int s = 0; s < splits; ++s) {
    std::printf(splits > 1 ? "  split %d of %d:\n" : "  the one pass:\n", s, splits);
    for (const attention::row_block& b : record.blocks) {
      if (b.split != s) continue;
      int ones = 0, p_bar_ones = 0;
      for (const float32 x : b.p) ones += x.bits == 0x3F800000u;
      for (const float8_e4m3 x : b.p_e4m3) p_bar_ones += x.bits == p_bar_max.bits;
      const int last_key = std::min(b.first_key + static_cast<int>(b.scores.size()), p.call.head.key_rows) - 1;
      std::printf("    block %d, keys %d..%d: max %s, running max %s, alpha %s, P = 1 at %d key%s%s%s\n", b.block,
                  b.first_key, last_key, fmt::format("{}", to_host(b.block_max)).c_str(),
                  fmt::format("{}", to_host(b.running_max)).c_str(),
                  b.alpha ? fmt::format("{}", to_host(*b.alpha)).c_str() : "(first block)", ones, ones == 1 ? "" : "s",
                  !fp8 ? ""
                       : fmt::format(", P-bar = e4m3(scale_s) = {} at {}", value_text(p_bar_max), p_bar_ones).c_str(),
                  !p.kernel().stabilize ? ""
                  : fmt::format(", {} within eps of the {}", b.ties,
                                p.kernel().stabilize->across_blocks ? "row's max so far" : "block max").c_str());
      std::printf("      row sums%s %s %s %s %s; O[%zu] = %s\n", p_bar_sums ? " of P-bar" : "",
                  fmt::format("{}", to_host(b.sums[0])).c_str(),
                  fmt::format("{}", to_host(b.sums[1])).c_str(), fmt::format("{}", to_host(b.sums[2])).c_str(),
                  fmt::format("{}", to_host(b.sums[3])).c_str(), at.col, short_text(b.o[at.col]).c_str());
    }
    const attention::row_split_end& end = record.splits[static_cast<std::size_t>(s)];
    if (!end.ran) std::printf("    no K/V block: O = 0, L = -inf\n");
    else
      std::printf("    end: row sum%s %s, %s %s, O[%zu] = %s, L = %s\n", p_bar_sums ? " (times descale_s)" : "",
                  short_text(end.sum).c_str(),
                  fp8 ? "RN(RN(1/sum) * o_scale)" : "1/sum", short_text(end.inverse).c_str(), at.col, short_text(end.o[at.col]).c_str(), short_text(end.lse).c_str());
  }
  if (splits > 1) std::printf("  combine: L = %s\n", short_text(record.lse).c_str());
  std::printf("  the %zu roundings of O[%zu], in order (error: the rounded result minus the step's exact result):\n",
              element.steps.size(), at.col);
  std::printf("    %5s %5s %5s %-13s %-16s %-34s %s\n", "step", "split", "block", "keys", "operation", "result", "error");
  std::size_t largest = 0;
  double largest_ulps = -1;
  for (std::size_t i = 0; i < element.steps.size(); ++i) {
    const attention::traced_step& step = element.steps[i];
    const bool tensor_core = step.what == attention::traced_step::kind::tensor_core;
    const std::string keys_text =
        tensor_core ? fmt::format("{}..{}", step.first_key, step.first_key + p.kernel().tensor_core.products_per_step - 1) : "";
    const std::string error = error_text(step.record);
    std::printf("    %5zu %5s %5s %-13s %-16s %-34s %s\n", i + 1,
                step.what == attention::traced_step::kind::to_bf16 ? "" : std::to_string(step.split).c_str(),
                step.block >= 0 ? std::to_string(step.block).c_str() : "", keys_text.c_str(),
                std::string(step_name(step.what)).c_str(),
                describe_value(step.record.result_format, step.record.result_bits).c_str(), error.c_str());
    if (step.record.error && step.record.result_value && step.what != attention::traced_step::kind::to_bf16) {
      const double ulps = std::fabs(step.record.error->convert_to<double>()) /
                          std::max(std::fabs(step.record.result_value->convert_to<double>()), 1e-300);
      if (ulps > largest_ulps) largest_ulps = ulps, largest = i;
    }
  }
  if (largest_ulps > 0)
    std::printf("\n  step %zu, the largest error relative to its result, in full:\n%s", largest + 1,
                render(element.steps[largest].record, output_style::text).c_str());
  std::printf("\n  step %zu, the conversion to bf16, in full:\n%s", element.steps.size(),
              render(element.steps.back().record, output_style::text).c_str());
  if (expected) {
    const float32 before = element.steps.size() >= 2 ? float32::from_bits(element.steps.back().record.operand_bits(0))
                                                     : float32::zero();
    std::printf("%s", conversion_window(before, *expected).c_str());
  }
}

}  // namespace bitexact::cli::attention_parts
