// cuBLAS's matrix products over arrays (matmul/gemm.hpp), for bitexact.matmul.
#include <cmath>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/scaled.hpp>

#include "binding.hpp"

namespace bitexact::python {
namespace {

template <format F>
py::array product(const py::array& a, const py::array& b, const std::optional<py::array>& bias, std::size_t m,
                   std::size_t n, std::size_t k, int splits, unsigned threads) {
  const std::span<const value<F>> av(values_of<F>(a, "a", m * k), m * k), bv(values_of<F>(b, "b", k * n), k * n);
  const std::span<const value<F>> biases =
      bias ? std::span<const value<F>>(values_of<F>(*bias, "bias", n), n) : std::span<const value<F>>{};
  std::vector<value<F>> d;
  {
    py::gil_scoped_release unlocked;
    d = matmul::gemm<F, F>({sm90_tensor_core, splits, 64}, {m, n, k}, av, bv, biases, threads);
  }
  auto out = new_values<F>(d.size());
  std::copy(d.begin(), d.end(), writable_values_of<F>(out));
  return py::array(out);
}

// D = A B (+ bias) for flat a [m][k] and b [k][n] of bf16 or fp16 bits.
py::array matmul_call(const py::array& a, const py::array& b, const std::optional<py::array>& bias, std::size_t m,
                      std::size_t n, std::size_t k, std::string_view format_name, int splits, unsigned threads) {
  if (splits < 1 || splits > 256) throw std::invalid_argument("splits must be from 1 to 256, not " + std::to_string(splits));
  const format f = format_named(format_name);
  if (f == bf16) return product<bf16>(a, b, bias, m, n, k, splits, threads);
  if (f == fp16) return product<fp16>(a, b, bias, m, n, k, splits, threads);
  throw std::invalid_argument("matmul models cuBLAS's bf16 and fp16 products; not " + std::string(name_of(f)) +
                              " (fp8's torch._scaled_mm is not modelled yet)");
}

template <format Out, format InA, format InB>
py::array scaled_product(const py::array& a, const py::array& b, const py::array& scale_a, const py::array& scale_b,
                         std::size_t m, std::size_t n, std::size_t k, bool fast_accum, unsigned threads) {
  const std::span<const value<InA>> av(values_of<InA>(a, "a", m * k), m * k);
  const std::span<const value<InB>> bv(values_of<InB>(b, "b", k * n), k * n);
  const auto scales = [](const py::array& x, const char* what, std::size_t count) {
    const std::size_t size = static_cast<std::size_t>(x.size());
    if (size != 1 && size != count)
      throw std::invalid_argument(std::string(what) + " has " + std::to_string(size) + " values; expected 1 or " +
                                  std::to_string(count));
    const std::span<const float32> values(values_of<fp32>(x, what, size), size);
    for (const float32 v : values)
      if (!std::isfinite(to_host(v))) throw std::invalid_argument(std::string(what) + " holds a value that is not finite");
    return values;
  };
  const std::span<const float32> sa = scales(scale_a, "scale_a", m), sb = scales(scale_b, "scale_b", n);
  matmul::scaled_gemm_kernel kernel;
  kernel.promotion_k = fast_accum ? 0 : 128;
  std::vector<value<Out>> d;
  {
    py::gil_scoped_release unlocked;
    d = matmul::scaled_gemm<Out, InA, InB>(kernel, {m, n, k}, av, bv, sa, sb, threads);
  }
  auto out = new_values<Out>(d.size());
  std::copy(d.begin(), d.end(), writable_values_of<Out>(out));
  return py::array(out);
}

// torch._scaled_mm's D = (A B) * scale_a * scale_b for flat fp8 a [m][k] and b [k][n].
py::array scaled_matmul_call(const py::array& a, const py::array& b, const py::array& scale_a, const py::array& scale_b,
                             std::size_t m, std::size_t n, std::size_t k, std::string_view a_format,
                             std::string_view b_format, std::string_view out_format, bool fast_accum,
                             unsigned threads) {
  const format fa = format_named(a_format), fb = format_named(b_format), out = format_named(out_format);
  const auto fp8 = [](format f) { return f == e4m3 || f == e5m2; };
  if (!fp8(fa) || !fp8(fb))
    throw std::invalid_argument("scaled_matmul takes e4m3 or e5m2 inputs, not " + std::string(name_of(fa)) + " and " +
                                std::string(name_of(fb)));
  if (out != bf16 && out != fp32)
    throw std::invalid_argument("scaled_matmul writes bf16 or fp32, not " + std::string(name_of(out)));
  const auto with_b = [&](auto out_tag, auto a_tag) {
    constexpr format Out = decltype(out_tag)::fmt, InA = decltype(a_tag)::fmt;
    return fb == e4m3 ? scaled_product<Out, InA, e4m3>(a, b, scale_a, scale_b, m, n, k, fast_accum, threads)
                      : scaled_product<Out, InA, e5m2>(a, b, scale_a, scale_b, m, n, k, fast_accum, threads);
  };
  const auto with_a = [&](auto out_tag) {
    return fa == e4m3 ? with_b(out_tag, format_tag<e4m3>{}) : with_b(out_tag, format_tag<e5m2>{});
  };
  return out == fp32 ? with_a(format_tag<fp32>{}) : with_a(format_tag<bf16>{});
}

}  // namespace

void register_matmul(py::module_& m) {
  m.def("_matmul", &matmul_call, py::arg("a"), py::arg("b"), py::arg("bias"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::arg("format"), py::arg("splits"), py::arg("threads"));
  m.def("_scaled_matmul", &scaled_matmul_call, py::arg("a"), py::arg("b"), py::arg("scale_a"), py::arg("scale_b"),
        py::arg("m"), py::arg("n"), py::arg("k"), py::arg("a_format"), py::arg("b_format"), py::arg("out_format"),
        py::arg("fast_accum"), py::arg("threads"));
}

}  // namespace bitexact::python
