// add_each, sub_each and mul_each against the single operations they batch:
// every element's bits, and the OR of the elements' flags. Under nearest-even
// the buffers go through the SSE2 lanes of elementwise.hpp, so these tests
// compare the lanes with the proven scalar operations; the exhaustive bf16
// sweeps compare them with the oracle (test_proof_exhaustive.cpp).
#include <doctest/doctest.h>

#include <bitexact/host/elementwise.hpp>

#include <array>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "oracle/sweep.hpp"  // every_mode()

using namespace bitexact;

namespace {

// Mostly what the lanes take (normal, exponents within +-40 of the bias, so
// sums are both close and far apart), with every kind of operand they refuse
// sprinkled in: random patterns (zeros, subnormals, infinities, NaN,
// overflowing and underflowing results), exact cancellations, the top binade.
template <format F>
value<F> draw(std::mt19937_64& rng, value<F> partner) {
  const std::uint64_t bits = rng();
  const std::uint32_t sign = bits & 1;
  switch ((bits >> 1) % 16) {
    case 0: return value<F>::from_bits(static_cast<std::uint32_t>(bits >> 32));
    case 1: return value<F>::from_bits(partner.bits ^ (1u << (F.width() - 1)));  // -a: an exact zero sum
    case 2: return value<F>::from_bits((sign << (F.width() - 1)) | (254u << F.fraction_bits));  // top binade
    default: break;
  }
  std::uniform_int_distribution<int> exponent(127 - 40, 127 + 40);
  const std::uint32_t fraction = static_cast<std::uint32_t>(bits >> 8) & value<F>::fraction_mask();
  const auto biased = static_cast<std::uint32_t>(exponent(rng));
  return value<F>::from_bits((sign << (F.width() - 1)) | (biased << F.fraction_bits) | fraction);
}

template <operation Op, format R, format A, format B>
rounded<R> single(value<A> a, value<B> b, const environment& env) {
  if constexpr (Op == operation::add) return add<R>(a, b, env);
  else if constexpr (Op == operation::sub) return sub<R>(a, b, env);
  else return mul<R>(a, b, env);
}

template <operation Op, format R, class InA, class InB, class Out>
flags batch(const InA& a, const InB& b, Out& out, const environment& env) {
  if constexpr (Op == operation::add) return add_each<R>(a, b, out, env);
  else if constexpr (Op == operation::sub) return sub_each<R>(a, b, out, env);
  else return mul_each<R>(a, b, out, env);
}

struct disagreement_count {
  long elements = 0, bits = 0, buffer_flags = 0, element_flags = 0;
};

// Buffers of every length from 0 to 40 (the lanes take four at a time; the
// rest go one by one), in every mode (stochastic with six probes of its
// random bits: 12 environments), compared element by element with the
// single operation; then each pair alone, repeated in all four lanes, so
// that the buffer's flags are that element's.
template <operation Op, format R, format A, format B>
disagreement_count compare_with_single(std::uint64_t seed) {
  disagreement_count count;
  std::mt19937_64 rng(seed);
  for (const environment& env : proof::every_mode()) {
    for (std::size_t length = 0; length <= 40; ++length) {
      std::vector<value<A>> a(length);
      std::vector<value<B>> b(length);
      std::vector<value<R>> out(length);
      for (std::size_t i = 0; i < length; ++i) {
        a[i] = draw<A>(rng, {});
        b[i] = draw<B>(rng, value<B>::from_bits(A == B ? a[i].bits : 0u));  // mixed formats: -0 instead of -a
      }
      const flags raised = batch<Op, R>(a, b, out, env);
      flags expected_flags;
      for (std::size_t i = 0; i < length; ++i) {
        const rounded<R> expected = single<Op, R>(a[i], b[i], env);
        expected_flags |= expected.raised;
        count.bits += out[i] != expected.result;
        ++count.elements;

        const std::array<value<A>, 4> same_a{a[i], a[i], a[i], a[i]};
        const std::array<value<B>, 4> same_b{b[i], b[i], b[i], b[i]};
        std::array<value<R>, 4> same_out{};
        count.element_flags += batch<Op, R>(same_a, same_b, same_out, env) != expected.raised;
        count.bits += same_out[3] != expected.result;
      }
      count.buffer_flags += raised != expected_flags;
    }
  }
  return count;
}

template <operation Op, format R, format A, format B>
void check_against_single() {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    const disagreement_count c = compare_with_single<Op, R, A, B>(seed);
    CAPTURE(seed);
    CHECK(c.elements == 12 * 820);
    CHECK(c.bits == 0);
    CHECK(c.buffer_flags == 0);
    CHECK(c.element_flags == 0);
  }
}

}  // namespace

TEST_CASE("add_each gives every element the single add's bits and the buffer the OR of its flags") {
  check_against_single<operation::add, fp32, fp32, fp32>();
  check_against_single<operation::add, bf16, bf16, bf16>();
  check_against_single<operation::add, tf32, tf32, tf32>();
  check_against_single<operation::add, fp32, fp32, bf16>();  // an fp32 accumulator plus a bf16 operand
  check_against_single<operation::add, bf16, fp32, fp32>();  // an fp32 sum rounded once to bf16
  check_against_single<operation::add, fp16, fp16, fp16>();  // not taken by the lanes: one by one
}

TEST_CASE("sub_each gives every element the single sub's bits and the buffer the OR of its flags") {
  check_against_single<operation::sub, fp32, fp32, fp32>();
  check_against_single<operation::sub, bf16, bf16, bf16>();
  check_against_single<operation::sub, fp32, bf16, fp32>();
}

TEST_CASE("mul_each gives every element the single mul's bits and the buffer the OR of its flags") {
  check_against_single<operation::mul, fp32, fp32, fp32>();
  check_against_single<operation::mul, bf16, bf16, bf16>();
  check_against_single<operation::mul, fp32, bf16, bf16>();
  check_against_single<operation::mul, bf16, fp32, tf32>();
  check_against_single<operation::mul, e4m3, e4m3, e4m3>();  // one by one
}

TEST_CASE("add_each works in place and rejects buffers of different lengths") {
  std::vector<bfloat16> a{bfloat16{0x3F80}, bfloat16{0x4000}, bfloat16{0x4040}, bfloat16{0x4080}, bfloat16{0x40A0}};
  const std::vector<bfloat16> b(5, bfloat16{0x3F80});  // 1.0
  CHECK(add_each(a, b, a).bits == 0);
  const std::vector<bfloat16> plus_one{bfloat16{0x4000}, bfloat16{0x4040}, bfloat16{0x4080}, bfloat16{0x40A0},
                                       bfloat16{0x40C0}};  // 2, 3, 4, 5, 6
  CHECK(a == plus_one);

  std::vector<bfloat16> short_out(4);
  CHECK_THROWS_WITH_AS(add_each(a, b, short_out), "add_each: the buffers differ in length (a 5, b 5, out 4)",
                       std::invalid_argument);
  CHECK_THROWS_AS(mul_each(std::vector<bfloat16>(3), b, std::vector<bfloat16>(3)), std::invalid_argument);
}

namespace {
struct result_collector {
  std::vector<std::uint32_t> results;
  void on(const result_event& e) { results.push_back(e.bits); }
  template <class Event>
  void on(const Event&) {}
};
}  // namespace

TEST_CASE("add_each reports every element's events, in order, to a listening observer") {
  result_collector counter;
  const std::vector<float32> a(6, float32{0x3F800000}), b(6, float32{0x33800000});  // 1 + 2^-24: a tie, stays even
  std::vector<float32> out(6);
  CHECK(add_each(a, b, out, {}, counter).bits == flags::inexact);
  CHECK(counter.results == std::vector<std::uint32_t>(6, 0x3F800000u));
}

TEST_CASE("add_each is usable in constant expressions") {
  constexpr auto sums = [] {
    const std::array<float32, 5> a{float32{0xC01A0E2E}, float32{0x3F800000}, float32{0x3F800000}, float32{0x3F800000},
                                   float32{0x7F800000}};
    const std::array<float32, 5> b{float32{0xC0130000}, float32{0x33800000}, float32{0x3F800000}, float32{0xBF800000},
                                   float32{0xFF800000}};
    std::array<float32, 5> out{};
    const flags raised = add_each(a, b, out);
    return std::pair{out, raised};
  }();
  static_assert(sums.first[0] == float32{0xC0968717});  // the paper's Section 3.3.2 sum
  static_assert(sums.first[4].is_nan() && sums.second.bits == (flags::inexact | flags::invalid));
  CHECK(sums.first[3] == float32{0});
}
