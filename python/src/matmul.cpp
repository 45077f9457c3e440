// cuBLAS's matrix products over arrays (matmul/gemm.hpp), for bitexact.matmul.
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include <bitexact/matmul/gemm.hpp>

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

}  // namespace

void register_matmul(py::module_& m) {
  m.def("_matmul", &matmul_call, py::arg("a"), py::arg("b"), py::arg("bias"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::arg("format"), py::arg("splits"), py::arg("threads"));
}

}  // namespace bitexact::python
