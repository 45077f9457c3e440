// Every public header (all_headers.hpp, generated from the include folder)
// and the templates a user instantiates, compiled under -Wall -Wextra
// -Wconversion -Wpedantic -Werror: the library must not warn in such builds.
#include "all_headers.hpp"

#include <array>
#include <cstddef>
#include <span>
#include <vector>

using namespace bitexact;

namespace {

template <format F>
void instantiate_operations() {
  const value<F> a = value<F>::from_bits(0x31), b = value<F>::from_bits(0x23);
  const environment env{.rounding = rounding_mode::stochastic, .random_bits = 7};
  (void)add(a, b, env), (void)sub(a, b, env), (void)mul(a, b, env), (void)fma(a, b, a, env);
  (void)div(a, b, env), (void)sqrt(a, env), (void)add<fp32>(a, b, env), (void)mul<fp32>(a, b, env);
  (void)convert<fp32>(a, env), (void)convert<F>(float32{}, env), (void)convert<e4m3>(a, env);
  (void)from_integer<F>(5, env), (void)to_integer(a, env), (void)from_double<F>(0.3, env), (void)to_double(a);
  (void)compare(a, b);
  std::vector<value<F>> x(5, a), y(5, b), out(5);
  (void)add_each(x, y, out), (void)sub_each(x, y, out), (void)mul_each(x, y, out);
  const std::vector<typename value<F>::storage> raw(5);
  (void)check_against_model<F>(raw, [&](std::size_t) { return a; }).message();
}

// Traces are built by the same templates as the results; one format of each width is enough for the renderers.
template <format F>
void instantiate_traces() {
  const value<F> a = value<F>::from_bits(0x31), b = value<F>::from_bits(0x23);
  const auto explain = [&](std::size_t) {
    return traced([&](auto& recorder) { return fma<fp32>(a, b, a, {}, recorder); }).record;
  };
  const std::vector<value<F>> raw(3);
  (void)check_against_model<F>(raw, [&](std::size_t) { return a; }, explain).message();
  (void)render(explain(0), output_style::json), (void)render(explain(0), output_style::latex);
  (void)render(traced([&](auto& recorder) { return div(a, b, {}, recorder); }).record, output_style::markdown);
  (void)render(traced([&](auto& recorder) { return sqrt(a, {}, recorder); }).record);
  (void)render(traced([&](auto& recorder) { return convert<e4m3>(a, {}, recorder); }).record);
}

template <format Acc, format In>
void instantiate_mma() {
  std::array<value<In>, 256> a{};
  std::array<value<In>, 128> b{};
  std::array<value<Acc>, 128> c{}, d{};
  mma_m16n8k16<Acc, In>(sm90_tensor_core, std::span<const value<In>, 256>(a), std::span<const value<In>, 128>(b),
                        std::span<const value<Acc>, 128>(c), std::span<value<Acc>, 128>(d));
}

}  // namespace

int main() {
  instantiate_operations<fp32>(), instantiate_operations<bf16>(), instantiate_operations<fp16>();
  instantiate_operations<tf32>(), instantiate_operations<e5m2>(), instantiate_operations<e4m3>();
  instantiate_traces<bf16>();
  instantiate_mma<fp32, bf16>(), instantiate_mma<fp16, fp16>();
  (void)ptx::rcp_approx(float32{0x40400000u}), (void)ptx::ex2_approx_ftz(float32{0xBFC00000u});
  return 0;
}
