// Operand parsing (include/bitexact/trace/parse.hpp): every syntax gives exact bits,
// inexact decimals are marked, and each malformed class is refused with a message.
// The names of formats and settings (core/names.hpp) and the result-format rule (core/dispatch.hpp).
#include <doctest/doctest.h>

#include <bitexact/core/dispatch.hpp>
#include <bitexact/core/names.hpp>
#include <bitexact/trace/parse.hpp>
#include <bitexact/trace/trace.hpp>

using namespace bitexact;

namespace {
std::uint32_t bits_of(std::string_view text, format default_format = fp32) {
  const auto parsed = parse_operand(text, default_format);
  REQUIRE_MESSAGE(parsed.ok(), parsed.error);
  return parsed.operand.bits;
}
bool exact(std::string_view text, format default_format = fp32) {
  return parse_operand(text, default_format).operand.exact;
}
std::string error_of(std::string_view text, format default_format = fp32) {
  return parse_operand(text, default_format).error;
}
}  // namespace

TEST_CASE("bit patterns need a prefix and fit their format") {
  CHECK(bits_of("fp32:0xC01A0E2E") == 0xC01A0E2Eu);
  CHECK(bits_of("bf16:0xC013") == 0xC013u);
  CHECK(bits_of("e4m3:0x7e") == 0x7Eu);
  CHECK(bits_of("tf32:0x7FFFF") == 0x7FFFFu);
  CHECK(parse_operand("bf16:0xC013", fp32).operand.fmt == bf16);
  CHECK(error_of("bf16:0x1C013").find("does not fit in bf16's 16 bits") != std::string::npos);
  CHECK(error_of("tf32:0x80000").find("does not fit") != std::string::npos);
  CHECK(error_of("0xC013").find("ambiguous") != std::string::npos);
  CHECK_FALSE(error_of("bf16:0xC0G3").empty());
  CHECK_FALSE(error_of("bf16:0x").empty());
}

TEST_CASE("tf32 in fp32 bits, as a GPU holds it, is the upper 19 bits; low bits set are refused") {
  CHECK(bits_of("tf32:fp32:0x3F800000") == 0x1FC00u);
  CHECK(parse_operand("tf32:fp32:0x3F800000", fp32).operand.fmt == tf32);
  CHECK(bits_of("tf32:fp32:0xC0132000") == bits_of("tf32:0x60099"));
  CHECK(error_of("tf32:fp32:0x3F801000") == "'tf32:fp32:0x3F801000' sets bits below tf32's 19 (low 13 bits "
                                             "0x1000); in fp32 bits a tf32 value has them zero: round it with "
                                             "bitexact trace convert 'fp32:0x3F801000' --to tf32");
  CHECK(error_of("tf32:fp32:1.5").find("write a 32-bit pattern") != std::string::npos);
  CHECK(error_of("tf32:fp32:0x1FFFFFFFF").find("does not fit in fp32's 32 bits") != std::string::npos);
}

TEST_CASE("echoed input is quoted with control bytes escaped and long text cut") {
  CHECK(quoted_input("1.5x") == "'1.5x'");
  CHECK(quoted_input(std::string_view("\x1B[2J\0z\xFF", 7)) == "'\\x1B[2J\\x00z\\xFF'");
  CHECK(quoted_input(std::string(49, '7')) == "'" + std::string(48, '7') + "...' (49 characters)");
  CHECK(error_of(std::string(1000, '1')) == "'" + std::string(48, '1') + "...' (1000 characters) has too many "
                                                                      "digits (at most 800)");
}

TEST_CASE("decimals convert exactly when they can and are marked when rounded") {
  CHECK(bits_of("-2.296875") == 0xC0130000u);
  CHECK(bits_of("-2.40625", bf16) == 0xC01Au);
  CHECK(bits_of("bf16:-2.40625") == 0xC01Au);
  CHECK(bits_of("-4.703990459442139") == 0xC0968717u);  // the paper's sum, as printed there
  CHECK_FALSE(exact("-4.703990459442139"));
  CHECK(bits_of("1e-3") == 0x3A83126Fu);
  CHECK(bits_of("0.1") == 0x3DCCCCCDu);
  CHECK_FALSE(exact("0.1"));
  CHECK(exact("0.5"));
  CHECK(bits_of("-0") == 0x80000000u);
  CHECK(bits_of("1.4e-45") == 0x00000001u);   // the smallest subnormal
  CHECK(bits_of("1e-50") == 0u);               // far below it: rounds to zero
  CHECK(parse_operand("1e-50", fp32).operand.rounded_to_zero);
  CHECK(bits_of("448", e4m3) == 0x7Eu);
  CHECK(bits_of("65504", fp16) == 0x7BFFu);
  CHECK(bits_of("1.0009765625", bf16) == 0x3F80u);  // 1 + 2^-10: rounds to 1 in bf16
  CHECK(error_of("1e39").find("beyond the largest finite fp32") != std::string::npos);
  CHECK(error_of("65520", fp16).find("beyond") != std::string::npos);  // rounds to inf in fp16
  CHECK(error_of("480", e4m3).find("beyond") != std::string::npos);    // rounds to e4m3's NaN pattern
  // e4m3 has no infinity: the advice must not send the user to one.
  CHECK(error_of("480", e4m3) == "'480' is beyond the largest finite e4m3 value; e4m3 has no infinity: write nan, the "
                                 "largest finite value or a bit pattern");
  CHECK(error_of("1e39").find("write inf or -inf") != std::string::npos);
}

TEST_CASE("C hex floats") {
  CHECK(bits_of("0x1.8p-3") == 0x3E400000u);
  CHECK(bits_of("-0x1p+127") == 0xFF000000u);
  CHECK(bits_of("0x1.fffffep127") == 0x7F7FFFFFu);
  CHECK(bits_of("bf16:0x1.8p-3") == 0x3E40u);
  CHECK(bits_of("0x1.000001p0") == 0x3F800000u);  // 1 + 2^-24: a tie, to even
  CHECK_FALSE(exact("0x1.000001p0"));
  CHECK(error_of("0x1.8").find("binary exponent") != std::string::npos);
  CHECK_FALSE(error_of("0x1.8p").empty());
}

TEST_CASE("specials") {
  CHECK(bits_of("inf") == 0x7F800000u);
  CHECK(bits_of("-inf") == 0xFF800000u);
  CHECK(bits_of("bf16:-inf") == 0xFF80u);
  CHECK(bits_of("nan") == 0x7FC00000u);
  CHECK(bits_of("-nan", bf16) == 0xFFC0u);
  CHECK(bits_of("e4m3:nan") == 0x7Fu);
  CHECK(error_of("e4m3:inf").find("no infinity") != std::string::npos);
}

TEST_CASE("malformed input is refused with a message, never a value") {
  for (const char* text : {"", "bf16:", "1.2.3", "1e", "1e+", "abc", "--1", "1.5x", ".", "+", "bf17:1", "0x", "1 2"}) {
    INFO(text);
    CHECK_FALSE(error_of(text).empty());
  }
  CHECK(error_of("bf17:1").find("unknown format 'bf17'") != std::string::npos);
}

TEST_CASE("format and rounding mode names") {
  CHECK(format_from_name("bfloat16") == bf16);
  CHECK(format_from_name("f16") == fp16);
  CHECK(format_from_name("fp8_e4m3") == e4m3);
  CHECK_FALSE(format_from_name("fp64"));
  CHECK(rounding_mode_from_name("minMag") == rounding_mode::toward_zero);
  CHECK(rounding_mode_from_name("near_maxMag") == rounding_mode::nearest_away);
  CHECK(rounding_mode_from_name("rup") == rounding_mode::upward);
  CHECK_FALSE(rounding_mode_from_name("sideways"));
}

namespace {
// Every spelling in a table names its row's value, and the row's first is name_of's; returns how many were read.
template <class Setting, std::size_t N, std::size_t Spellings>
int spellings_read_back(const std::array<setting_spelling<Setting, Spellings>, N>& table) {
  int read = 0;
  for (const auto& row : table) {
    CHECK(name_of(row.value) == row.names[0]);
    for (const std::string_view spelling : row.names) {
      if (spelling.empty()) continue;
      INFO(spelling);
      CHECK(setting_from_name(table, spelling) == row.value);
      ++read;
    }
  }
  return read;
}
}  // namespace

TEST_CASE("every spelling in core/names.hpp reads back as its row's value, and name_of gives the first") {
  CHECK(spellings_read_back(rounding_spellings) == 24);
  CHECK(spellings_read_back(tininess_spellings) == 4);
  CHECK(spellings_read_back(nan_policy_spellings) == 4);
  CHECK(spellings_read_back(format_spellings) == 21);
  CHECK(name_of(format{5, 3}) == "custom");
  CHECK(format_names_hint() == "fp32, bf16, fp16, tf32, e5m2, e4m3");
  // The lists in error messages put the environment's default first, whatever the enum's order.
  CHECK(setting_names_hint(tininess_spellings) == "after_rounding (or after), before_rounding (or before)");
  CHECK(rounding_names_hint().starts_with("nearest_even (or rne, near_even, nearest), nearest_away (or rna, "));
  CHECK(name_of(rounding_reason::tie_stays_even) == "tie_stays_even");
  CHECK(name_of(special_reason::out_of_range_integer) == "out_of_range_integer");
  CHECK(name_of(operation::to_integer) == "to_integer");
  CHECK(describe(rounding_mode::downward) == std::string_view("round toward -infinity"));
}

// The one rule the command (--to) and the Python binding (result_format=) apply.
static_assert(result_format_of({bf16, bf16}, std::nullopt) == bf16);
static_assert(result_format_of({bf16, bf16}, fp16) == fp16);
static_assert(!result_format_of({fp32, bf16}, std::nullopt));
static_assert(!result_format_of({bf16, bf16, fp32}, std::nullopt));

TEST_CASE("a mix of fp32 and a narrow format rounds into any format named, once") {
  // 1 + 2^-11 + 2^-23 (fp32) + 0 (bf16) into fp16: above the tie at 2^-11, so up to 1 + 2^-10.
  const std::uint32_t bits = with_operation_formats(fp32, bf16, fp16, [](auto a, auto b, auto r) {
    using A = typename decltype(a)::value_type;
    using B = typename decltype(b)::value_type;
    return std::uint32_t{add<decltype(r)::fmt>(A::from_bits(0x3F801001), B::from_bits(0)).result.bits};
  });
  CHECK(bits == 0x3C01);
  CHECK_THROWS_WITH_AS(with_operation_formats(bf16, fp16, fp32, [](auto, auto, auto) { return 0; }),
                       doctest::Contains("cannot be mixed"), std::invalid_argument);
}
