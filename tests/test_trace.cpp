// Traces: the paper's worked example reproduced from the recorded events,
// the paper's 2-bit table derived from traces, and every renderer's output.
#include <doctest/doctest.h>

#include <bitexact/bitexact.hpp>
#include <bitexact/trace/fmt.hpp>
#include <bitexact/trace/render.hpp>
#include <bitexact/trace/trace.hpp>

#include <cctype>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

using namespace bitexact;

namespace {

// Section 3.3.2 of the paper: the FP32 accumulation, then the narrowing to BF16.
auto golden_sum() {
  return traced([](auto& recorder) { return add(float32{0xC01A0E2E}, float32{0xC0130000}, {}, recorder); });
}
auto golden_narrowing() {
  return traced([](auto& recorder) { return convert<bf16>(float32{0xC0968717}, {}, recorder); });
}

// A minimal JSON reader: enough to prove the renderer's output parses and to
// read fields back. Values are kept as their text (strings unquoted).
struct json {
  std::string scalar;
  std::map<std::string, json> object;
  std::vector<json> array;
  char kind = 's';  // 's' scalar or string, 'o' object, 'a' array

  const json& operator[](const std::string& key) const { return object.at(key); }
};

struct json_reader {
  const std::string& text;
  std::size_t at = 0;

  void space() {
    while (at < text.size() && std::isspace(static_cast<unsigned char>(text[at]))) ++at;
  }
  void expect(char c) {
    space();
    if (at >= text.size() || text[at] != c) throw std::runtime_error("JSON: expected " + std::string(1, c) + " at " + std::to_string(at));
    ++at;
  }
  std::string string() {
    expect('"');
    std::string out;
    while (at < text.size() && text[at] != '"') {
      if (text[at] == '\\') {
        ++at;
        const char e = text.at(at);
        if (e == 'u') {
          out += '?';
          at += 4;
        } else {
          out += e == 'n' ? '\n' : e == 't' ? '\t' : e;
        }
      } else {
        if (static_cast<unsigned char>(text[at]) < 0x20) throw std::runtime_error("JSON: raw control character");
        out += text[at];
      }
      ++at;
    }
    expect('"');
    return out;
  }
  json value() {
    space();
    json v;
    if (text.at(at) == '{') {
      v.kind = 'o';
      ++at;
      space();
      if (text.at(at) == '}') return ++at, v;
      do {
        const std::string key = string();
        expect(':');
        v.object[key] = value();
        space();
      } while (text.at(at) == ',' && ++at);
      expect('}');
    } else if (text.at(at) == '[') {
      v.kind = 'a';
      ++at;
      space();
      if (text.at(at) == ']') return ++at, v;
      do {
        v.array.push_back(value());
        space();
      } while (text.at(at) == ',' && ++at);
      expect(']');
    } else if (text.at(at) == '"') {
      v.scalar = string();
    } else {
      const std::size_t start = at;
      while (at < text.size() && (std::isalnum(static_cast<unsigned char>(text[at])) || text[at] == '-' || text[at] == '.' || text[at] == '+'))
        ++at;
      v.scalar = text.substr(start, at - start);
      const bool literal = v.scalar == "true" || v.scalar == "false" || v.scalar == "null";
      const bool number = !v.scalar.empty() && (std::isdigit(static_cast<unsigned char>(v.scalar[0])) || v.scalar[0] == '-');
      if (!literal && !number) throw std::runtime_error("JSON: bad token " + v.scalar);
    }
    return v;
  }
  json document() {
    json v = value();
    space();
    if (at != text.size()) throw std::runtime_error("JSON: trailing text");
    return v;
  }
};

// Whether every { has its }, ignoring escaped braces \{ \}.
bool latex_braces_balance(const std::string& s) {
  int depth = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == '{' || s[i + 1] == '}' || s[i + 1] == '\\')) {
      ++i;
      continue;
    }
    if (s[i] == '%') {  // a comment runs to the end of the line
      while (i < s.size() && s[i] != '\n') ++i;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}' && --depth < 0) return false;
  }
  return depth == 0;
}

bool contains(const std::string& haystack, const std::string& needle) { return haystack.find(needle) != std::string::npos; }

}  // namespace

TEST_SUITE("trace") {

TEST_CASE("golden 3.3.2: the fp32 significands add to -10.01011010000111000101110 and carry out") {
  const auto [sum, t] = golden_sum();
  CHECK(sum.result.bits == 0xC0968717u);
  CHECK(sum.raised.bits == 0);
  REQUIRE(t.operands.size() == 2);
  CHECK(t.operands[0].significand_binary() == "1.00110100000111000101110");
  CHECK(t.operands[1].significand_binary() == "1.00100110000000000000000");
  CHECK(t.operands[0].biased_exponent() == 128);
  CHECK(t.operands[0].unbiased_exponent() == 1);
  REQUIRE(t.alignment);
  CHECK(t.alignment->exponent_difference == 0);
  CHECK(t.alignment->sticky == false);
  CHECK(t.exact_binary == "-10.01011010000111000101110");
  CHECK(t.exact_reference_exponent == 1);
  CHECK(t.normalization_shift == 1);  // carry-out: shift right, exponent + 1
  REQUIRE(t.rounding);
  CHECK(t.rounding->reason == rounding_reason::exact);
  CHECK(t.kept_binary == "1.00101101000011100010111");
  REQUIRE(t.error);
  CHECK(*t.error == 0);
  CHECK(to_decimal(*t.exact_value) == "-4.703990459442138671875");
}

TEST_CASE("golden 3.3.2: fp32 0xC0968717 to bf16 rounds up to 0xC097 on guard 1 and sticky, error exactly -30953/2^21") {
  const auto [narrow, t] = golden_narrowing();
  CHECK(narrow.result.bits == 0xC097);
  CHECK(narrow.raised.bits == flags::inexact);
  REQUIRE(t.rounding);
  CHECK(t.kept_binary == "1.0010110");  // the paper's 7-bit fraction 0010110
  CHECK(t.rounding->guard == true);     // the paper's "rounding bit is 1"
  CHECK(t.rounding->round == false);
  CHECK(t.rounding->sticky == true);    // "nonzero bits after the rounding bit"
  CHECK(t.sticky_bits == "00011100010111");
  CHECK(t.rounding->increment == true);
  CHECK(t.rounding->reason == rounding_reason::above_half);
  CHECK(t.rounded_binary == "1.0010111");  // 0010110 + 1 = 0010111
  REQUIRE(t.error);
  // The paper prints -0.014759540557861328 (a double); the exact error is this dyadic rational.
  CHECK(*t.error == exact_rational(-30953, 2097152));
  CHECK(to_decimal(*t.error) == "-0.014759540557861328125");
  CHECK(static_cast<double>(*t.error) == -0.014759540557861328);
  CHECK(*t.result_value == exact_rational(-151, 32));  // -4.71875
  REQUIRE(t.flag_reasons.size() == 1);
  CHECK(t.flag_reasons[0].flag == flags::inexact);
}

TEST_CASE("paper table: every 2-bit significand sum and its shifted-out bit, derived from e5m2 traces") {
  // e5m2 significands are 1.xy; two of them with one exponent always carry out,
  // and the sum's last bit (xy + x'y' in its low bits) is shifted out: the guard bit.
  std::string table;
  int pairs = 0;
  for (std::uint32_t low_a = 0; low_a < 4; ++low_a) {
    for (std::uint32_t low_b = low_a; low_b < 4; ++low_b) {
      const float8_e5m2 a = float8_e5m2::from_bits((15u << 2) | low_a);  // 1.xy * 2^0
      const float8_e5m2 b = float8_e5m2::from_bits((15u << 2) | low_b);
      const auto [sum, t] = traced([&](auto& recorder) { return add(a, b, {}, recorder); });
      REQUIRE(t.exact);
      CHECK(t.normalization_shift == 1);
      // The exact sum is 1ab + 1cd = 1000 + (ab + cd): its low three bits are the 2-bit sum.
      const auto low_sum = static_cast<std::uint32_t>((t.exact->significand >> (t.exact_reference_exponent - 2 - t.exact->exponent)) & 7);
      const std::string digits = low_sum >= 4 ? binary_digits(low_sum, 3) : binary_digits(low_sum, 2);
      REQUIRE(t.rounding);
      CHECK(t.rounding->guard == ((low_sum & 1) != 0));  // the shifted-out bit is the rounding bit
      if (!table.empty()) table += ' ';
      table += binary_digits(low_a, 2);
      table += '+';
      table += binary_digits(low_b, 2);
      table += '=';
      table += digits;
      ++pairs;
    }
  }
  CHECK(pairs == 10);
  CHECK(table ==
        "00+00=00 00+01=01 00+10=10 00+11=11 01+01=10 01+10=11 01+11=100 10+10=100 10+11=101 11+11=110");
}

TEST_CASE("alignment of unequal exponents names the bits past the larger operand's last place") {
  const auto [difference, t] =
      traced([](auto& recorder) { return sub(bfloat16{0x4120}, bfloat16{0x3F81}, {}, recorder); });  // 10 - 1.0078125
  CHECK(difference.result.bits == 0x4110);
  REQUIRE(t.alignment);
  CHECK(t.alignment->exponent_difference == 3);
  CHECK(t.alignment->smaller_is_first == false);
  CHECK(t.exact_binary == "1.0001111111");
  CHECK(t.exact->effective_subtraction);
  CHECK(*t.error == exact_rational(1, 128));
  const std::string text = render(t);
  CHECK(contains(text, "exponent difference 3: b's significand moves 3 places right"));
  CHECK(contains(text, "bits past a's last place: 001"));
}

TEST_CASE("sqrt states a rounded true value; division's inexact quotient shows its sticky tail") {
  const auto [root, r] = traced([](auto& recorder) { return bitexact::sqrt(float32{0x40000000}, {}, recorder); });
  CHECK(root.result.bits == 0x3FB504F3u);
  CHECK(r.exact_value_is_rounded);
  CHECK(contains(to_decimal(*r.exact_value, 30), "1.414213562373095048801688724209"));
  CHECK(contains(render(r), "rounded: a root has no finite expansion"));

  const auto [third, q] = traced([](auto& recorder) { return div(float32{0x3F800000}, float32{0x40400000}, {}, recorder); });
  CHECK(third.result.bits == 0x3EAAAAABu);
  CHECK(!q.exact_value_is_rounded);
  CHECK(*q.exact_value == exact_rational(1, 3));
  CHECK(q.exact_binary.ends_with("..."));
  CHECK(*q.error == exact_rational(1, 3 * (1 << 25)));  // 0x3EAAAAAB - 1/3 = 1/(3 * 2^25)
}

TEST_CASE("special cases and flags carry their reasons") {
  const auto [overflow, o] = traced([](auto& recorder) { return mul(bfloat16{0x7F00}, bfloat16{0x7F00}, {}, recorder); });
  CHECK(overflow.result.bits == 0x7F80);
  CHECK(overflow.raised.bits == (flags::overflow | flags::inexact));
  REQUIRE(o.flag_reasons.size() == 2);
  CHECK(o.flag_reasons[0].flag == flags::overflow);
  CHECK(!o.error);  // an infinite result has no finite error

  const auto [invalid, i] = traced([](auto& recorder) {
    return add(float32::infinity(false), float32::infinity(true), {}, recorder);
  });
  CHECK(invalid.result.bits == 0xFFC00000u);
  REQUIRE(i.specials.size() == 1);
  CHECK(i.specials[0] == special_reason::invalid_operation);
  CHECK(contains(render(i), "invalid: infinities of opposite sign cancel"));
}

TEST_CASE("text renderer reads as a worked example of the golden case") {
  const std::string sum = render(golden_sum().record);
  CHECK(contains(sum, "-1.00110100000111000101110\n"));
  CHECK(contains(sum, "=            -10.01011010000111000101110\n"));
  CHECK(contains(sum, "carry-out: the significand shifts right by 1, exponent 1 -> 2"));
  const std::string narrow = render(golden_narrowing().record);
  CHECK(contains(narrow, "bits         1.0010110 | guard 1 | round 0 | sticky bits 00011100010111 -> sticky 1"));
  CHECK(contains(narrow, "decision     round up (magnitude + 1 ulp)"));
  CHECK(contains(narrow, "bf16:0xC097 (-4.71875)"));
  CHECK(contains(narrow, "error        -0.014759540557861328125 = -30953/2097152"));
  CHECK(fmt::format("{}", golden_narrowing().record) == narrow);
}

TEST_CASE("markdown renderer puts bit rows in code blocks") {
  const std::string md = render(golden_narrowing().record, output_style::markdown);
  CHECK(md.starts_with("### convert fp32 -> bf16\n"));
  CHECK(contains(md, "```\nbits       1.0010110 | guard 1 | round 0 | sticky bits 00011100010111 -> sticky 1\n"));
  CHECK(contains(md, "- **error**: -0.014759540557861328125"));
}

TEST_CASE("latex renderer colours guard, round and sticky bits and balances its braces") {
  const std::string sum = render(golden_sum().record, output_style::latex);
  const std::string narrow = render(golden_narrowing().record, output_style::latex);
  const std::string shifted = render(
      traced([](auto& recorder) { return sub(bfloat16{0x4120}, bfloat16{0x3F81}, {}, recorder); }).record,
      output_style::latex);
  for (const auto* s : {&sum, &narrow, &shifted}) {
    CHECK(latex_braces_balance(*s));
    CHECK(s->starts_with("% bitexact trace. Needs \\usepackage{xcolor}"));
    CHECK(contains(*s, "\\begin{tabular}"));
    CHECK(contains(*s, "\\end{tabular}\n"));
  }
  CHECK(contains(narrow, "-1.0010110\\textcolor{red}{1}\\textcolor{orange}{0}\\textcolor{blue}{00011100010111}"));
  CHECK(contains(shifted, "\\textcolor{teal}{001}"));  // b's bits past a's last place
  CHECK(!latex_braces_balance("{\\textcolor{red}{1}"));  // the checker itself can fail
}

TEST_CASE("json renderer parses back with the golden fields as exact strings") {
  const std::string text = render(golden_narrowing().record, output_style::json);
  const json doc = json_reader{text}.document();
  CHECK(doc["operation"].scalar == "convert");
  CHECK(doc["operands"].array.at(0)["bits"].scalar == "0xC0968717");
  CHECK(doc["operands"].array.at(0)["significand"].scalar == "1.00101101000011100010111");
  CHECK(doc["rounding"]["guard"].scalar == "1");
  CHECK(doc["rounding"]["sticky"].scalar == "1");
  CHECK(doc["rounding"]["sticky_bits"].scalar == "00011100010111");
  CHECK(doc["rounding"]["increment"].scalar == "true");
  CHECK(doc["rounding"]["reason"].scalar == "above_half");
  CHECK(doc["result"]["bits"].scalar == "0xC097");
  CHECK(doc["flags"]["raised"].array.at(0)["flag"].scalar == "inexact");
  CHECK(doc["error"]["fraction"].scalar == "-30953/2097152");
  CHECK(doc["error"]["decimal"].scalar == "-0.014759540557861328125");

  const json sum = json_reader{render(golden_sum().record, output_style::json)}.document();
  CHECK(sum["exact"]["binary"].scalar == "-10.01011010000111000101110");
  CHECK(sum["normalization"]["kind"].scalar == "carry_out");
  CHECK(sum["result"]["bits"].scalar == "0xC0968717");

  // Every special path renders valid JSON too.
  const json nan = json_reader{render(traced([](auto& r) {
                                        return mul(float16::zero(), float16::infinity(), {}, r);
                                      }).record,
                                      output_style::json)}
                       .document();
  CHECK(nan["flags"]["bits"].scalar == "0x10");
  std::string broken = text;
  broken.pop_back();
  broken.pop_back();
  CHECK_THROWS(json_reader{broken}.document());
}

TEST_CASE("output style names") {
  CHECK(output_style_from_name("md") == output_style::markdown);
  CHECK(output_style_from_name("latex") == output_style::latex);
  CHECK(output_style_from_name("json") == output_style::json);
  CHECK(output_style_from_name("text") == output_style::text);
  CHECK(!output_style_from_name("html"));
}

TEST_CASE("fmt formatters print values, rounded results, flags, modes and formats") {
  CHECK(fmt::format("{}", bfloat16{0xC097}) == "bf16:0xC097 (-4.71875)");
  CHECK(fmt::format("{}", float32{0xC0968717}) == "fp32:0xC0968717 (-4.703990459442139)");
  CHECK(fmt::format("{}", float8_e4m3{0x7F}) == "e4m3:0x7F (nan)");
  CHECK(fmt::format("{}", tfloat32{0x1FC00}) == "tf32:0x1FC00 (1)");
  CHECK(fmt::format("{}", convert<bf16>(float32{0xC0968717})) == "bf16:0xC097 (-4.71875) [inexact]");
  CHECK(fmt::format("{}", flags{flags::underflow | flags::inexact}) == "underflow|inexact");
  CHECK(fmt::format("{}", flags{}) == "none");
  CHECK(fmt::format("{}", rounding_mode::to_odd) == "to_odd");
  CHECK(fmt::format("{}", bf16) == "bf16");
  CHECK(fmt::format("{}", format{5, 3}) == "e5m3");
  CHECK(fmt::format("{:>8}", e4m3) == "    e4m3");
}

}  // TEST_SUITE

namespace {
// An observer attached at run time: a switch stands for the sink pointer.
struct switchable_observer {
  bool attached = false;
  int events = 0;
  bool listening() const { return attached; }
  template <class Event>
  void on(const Event&) {
    ++events;
  }
};
}  // namespace

TEST_SUITE("trace") {
TEST_CASE("an observer that is not listening gets no events and the same results as no observer") {
  const float32 a{0xC01A0E2E}, b{0xC0130000};
  switchable_observer detached, attached{true};
  const auto plain_sum = add(a, b), plain_product = mul(a, b), plain_difference = sub(a, b);
  CHECK(add(a, b, {}, detached) == plain_sum);
  CHECK(mul(a, b, {}, detached) == plain_product);
  CHECK(sub(a, b, {}, detached) == plain_difference);
  CHECK(detached.events == 0);
  CHECK(add(a, b, {}, attached) == plain_sum);
  CHECK(mul(a, b, {}, attached) == plain_product);
  CHECK(attached.events > 8);  // operation, operands, alignment, exact, normalization, rounding, result, ...
  CHECK(plain_sum.result.bits == 0xC0968717u);
}
}  // TEST_SUITE

namespace {

// Listens to two kinds of event and no others: under the one rule it receives
// exactly those, from every operation, as a full recorder does.
struct rounding_and_result_listener {
  std::vector<rounding_event> roundings;
  std::vector<result_event> results;
  void on(const rounding_event& e) { roundings.push_back(e); }
  void on(const result_event& e) { results.push_back(e); }
};

bool same_rounding(const rounding_event& x, const rounding_event& y) {
  return x.target == y.target && x.mode == y.mode && x.sign == y.sign && x.lsb_exponent == y.lsb_exponent &&
         x.kept == y.kept && x.guard == y.guard && x.round == y.round && x.sticky == y.sticky &&
         x.increment == y.increment && x.reason == y.reason && x.carry_out == y.carry_out &&
         x.subnormal == y.subnormal && x.tiny == y.tiny;
}

}  // namespace

TEST_SUITE("trace") {
TEST_CASE("an observer of some events receives those events from every operation, as a recorder does") {
  static_assert(listens_to<rounding_and_result_listener, rounding_event>);
  static_assert(!listens_to<rounding_and_result_listener, operand_event>);
  static_assert(!observer<rounding_and_result_listener>);
  const float32 a{0xC01A0E2E}, b{0xC0130000}, c{0x3F800001};
  const environment env{.rounding = rounding_mode::upward};
  // Each operation runs once with the partial observer and once with a recorder.
  const auto compare = [](const char* what, auto&& run) {
    CAPTURE(what);
    rounding_and_result_listener partial;
    const auto result = run(partial);
    const auto [recorded_result, record] = traced([&](auto& recorder) { return run(recorder); });
    CHECK(result == recorded_result);
    REQUIRE(record.rounding.has_value());
    REQUIRE(partial.roundings.size() == 1);
    CHECK(same_rounding(partial.roundings[0], *record.rounding));
    REQUIRE(partial.results.size() == 1);
    CHECK(partial.results[0].bits == record.result_bits);
  };
  compare("add", [&](auto& obs) { return add<bf16>(a, b, env, obs); });
  compare("sub", [&](auto& obs) { return sub<bf16>(a, c, env, obs); });
  compare("mul", [&](auto& obs) { return mul<bf16>(a, b, env, obs); });
  compare("fma", [&](auto& obs) { return fma<bf16>(a, b, c, env, obs); });
  compare("div", [&](auto& obs) { return div<bf16>(a, b, env, obs); });
  compare("sqrt", [&](auto& obs) { return sqrt<bf16>(c, env, obs); });
  compare("convert", [&](auto& obs) { return convert<bf16>(a, env, obs); });
  compare("from_integer", [&](auto& obs) { return from_integer<bf16>(123457, env, obs); });
}
}  // TEST_SUITE
