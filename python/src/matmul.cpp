// The GEMM emulator over arrays (matmul/gemm.hpp) for bitexact.matmul and
// bitexact.scaled_matmul: the kernel is a preset's name or a description's
// JSON; the library checks the call.
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <bitexact/core/dispatch.hpp>
#include <bitexact/matmul/description_json.hpp>
#include <bitexact/matmul/gemm.hpp>
#include <bitexact/matmul/identify.hpp>
#include <bitexact/matmul/kernels.hpp>

#include "binding.hpp"

namespace bitexact::python {
namespace {

struct gemm_arguments {
  std::size_t m, n, k;
  std::optional<py::array> scale_a, scale_b, c, bias;
  std::vector<std::size_t> scale_a_shape, scale_b_shape;
  float alpha, beta;
  unsigned threads;
  // "run": D; "identify": the candidates against `expected`; "explain": output (row, col).
  std::string action;
  std::optional<py::array> expected;
  bool kernel_given;
  std::size_t row, col;
};

py::dict step_dict(const matmul::step_record& s) {
  py::dict d;
  d["k_first"] = s.k_first, d["k_end"] = s.k_end, d["before"] = s.before.bits, d["after"] = s.after.bits;
  d["e_max"] = s.e_max, d["lsb_exponent"] = s.lsb_exponent, d["terms_cut"] = s.terms_cut;
  return d;
}

template <format Out>
py::dict explanation_dict(const matmul::output_explanation<Out>& e) {
  py::list splits;
  for (const matmul::split_record& split : e.splits) {
    py::list pieces;
    for (const matmul::piece_record& piece : split.pieces) {
      py::list steps;
      for (const matmul::step_record& step : piece.steps) steps.append(step_dict(step));
      py::dict p;
      p["first"] = piece.first, p["end"] = piece.end, p["steps"] = steps, p["chain"] = piece.chain.bits;
      p["accumulator"] = piece.accumulator.bits;
      if (e.blocks) p["scale_a"] = to_host(piece.sa), p["scale_b"] = to_host(piece.sb);
      pieces.append(p);
    }
    py::dict sd;
    sd["first"] = split.first, sd["end"] = split.end, sd["pieces"] = pieces, sd["total"] = split.total.bits;
    splits.append(sd);
  }
  py::dict d;
  d["row"] = e.row, d["col"] = e.col, d["splits"] = splits, d["sum"] = e.epilogue.sum.bits;
  if (e.epilogue.has_scale) d["scaled"] = e.epilogue.scaled.bits;
  if (e.epilogue.has_alpha_beta) d["alpha_beta"] = e.epilogue.combined.bits;
  if (e.epilogue.has_bias) d["biased"] = e.epilogue.biased.bits;
  d["out"] = e.out.bits;
  return d;
}

template <format InA, format InB, format Out>
py::object product(const matmul::gemm_description& d, const py::array& a, const py::array& b, const gemm_arguments& g) {
  matmul::gemm_call<InA, InB, Out> call;
  call.shape = {g.m, g.n, g.k};
  call.a = {values_of<InA>(a, "a", g.m * g.k), g.m * g.k};
  call.b = {values_of<InB>(b, "b", g.k * g.n), g.k * g.n};
  if (g.c) call.c = {values_of<Out>(*g.c, "c", g.m * g.n), g.m * g.n};
  if (g.bias) call.bias = {values_of<Out>(*g.bias, "bias", g.n), g.n};
  const auto scales = [&](const std::optional<py::array>& x, const std::vector<std::size_t>& shape, bool of_a,
                          matmul::scale_layout& layout, std::span<const float32>& values) {
    if (!x) return;
    layout = matmul::scale_layout_of(shape, of_a, call.shape);
    if (layout == matmul::scale_layout::none)
      throw std::invalid_argument(std::string(of_a ? "scale_a" : "scale_b") + " has the wrong shape; expected " +
                                  matmul::scale_shapes(of_a, call.shape));
    const std::size_t size = static_cast<std::size_t>(x->size());
    values = {values_of<fp32>(*x, of_a ? "scale_a" : "scale_b", size), size};
  };
  scales(g.scale_a, g.scale_a_shape, true, call.a_scales, call.scale_a);
  scales(g.scale_b, g.scale_b_shape, false, call.b_scales, call.scale_b);
  call.alpha = from_host(g.alpha), call.beta = from_host(g.beta);
  call.threads = g.threads;
  matmul::check_call(d, call);
  if (g.action == "explain") {
    if (g.row >= g.m || g.col >= g.n)
      throw std::invalid_argument("explain: element (" + std::to_string(g.row) + ", " + std::to_string(g.col) +
                                  ") is outside D, (" + std::to_string(g.m) + ", " + std::to_string(g.n) + ")");
    return explanation_dict(matmul::explain_output(d, call, g.row, g.col));
  }
  if (g.action == "identify") {
    const std::span<const value<Out>> bits(values_of<Out>(*g.expected, "expected", g.m * g.n), g.m * g.n);
    const std::vector<value<Out>> expected(bits.begin(), bits.end());
    std::vector<matmul::identified> found;
    {
      py::gil_scoped_release unlocked;
      found = matmul::identify(g.kernel_given ? std::vector<matmul::gemm_description>{d}
                                              : matmul::presets_taking<InA, InB>(),
                               call, expected);
    }
    py::list out;
    for (const matmul::identified& r : found) out.append(py::make_tuple(r.name, r.splits, r.mismatches));
    return out;
  }
  std::vector<value<Out>> out;
  {
    py::gil_scoped_release unlocked;
    out = matmul::gemm(d, call);
  }
  auto result = new_values<Out>(out.size());
  std::copy(out.begin(), out.end(), writable_values_of<Out>(result));
  return py::array(result);
}

// D for flat a [m][k] and b [k][n]; kernel a preset's name, a description's
// JSON (starting with '{') or empty for A's format's default; splits 0 for the description's.
py::object gemm_call(const py::array& a, const py::array& b, std::size_t m, std::size_t n, std::size_t k,
                     std::string_view a_format, std::string_view b_format, std::string_view out_format,
                     std::string_view kernel, bool kernel_given, int splits, std::optional<py::array> scale_a,
                     std::vector<std::size_t> scale_a_shape, std::optional<py::array> scale_b,
                     std::vector<std::size_t> scale_b_shape, float alpha, float beta, std::optional<py::array> c,
                     std::optional<py::array> bias, unsigned threads, std::string action,
                     std::optional<py::array> expected, std::size_t row, std::size_t col) {
  const format fa = format_named(a_format), fb = format_named(b_format), fo = format_named(out_format);
  matmul::gemm_description d = kernel.empty()           ? matmul::default_gemm_preset(fa)
                               : kernel.front() == '{' ? matmul::gemm_from_json(kernel)
                                                        : matmul::find_gemm_preset(kernel);
  if (splits != 0) {
    if (splits < 1 || splits > 256) throw std::invalid_argument("splits must be from 1 to 256, not " + std::to_string(splits));
    d.splits = splits;
  }
  const gemm_arguments g{m, n, k, std::move(scale_a), std::move(scale_b), std::move(c), std::move(bias),
                         std::move(scale_a_shape), std::move(scale_b_shape), alpha, beta, threads, std::move(action),
                         std::move(expected), kernel_given, row, col};
  return matmul::visit_gemm_formats(fa, fb, fo, [&](auto ta, auto tb, auto to) -> py::object {
    return product<decltype(ta)::fmt, decltype(tb)::fmt, decltype(to)::fmt>(d, a, b, g);
  });
}

py::list gemm_presets() {
  py::list names;
  for (const matmul::gemm_description& d : matmul::gemm_presets()) names.append(py::make_tuple(d.name, d.summary));
  return names;
}

std::string gemm_preset_json(std::string_view name) { return matmul::gemm_to_json(matmul::find_gemm_preset(name)).dump(2); }

}  // namespace

void register_matmul(py::module_& m) {
  m.def("_gemm", &gemm_call, py::arg("a"), py::arg("b"), py::arg("m"), py::arg("n"), py::arg("k"), py::arg("a_format"),
        py::arg("b_format"), py::arg("out_format"), py::arg("kernel"), py::arg("kernel_given"), py::arg("splits"),
        py::arg("scale_a"), py::arg("scale_a_shape"), py::arg("scale_b"), py::arg("scale_b_shape"), py::arg("alpha"),
        py::arg("beta"), py::arg("c"), py::arg("bias"), py::arg("threads"), py::arg("action"), py::arg("expected"),
        py::arg("row"), py::arg("col"));
  m.def("_gemm_presets", &gemm_presets);
  m.def("_gemm_preset_json", &gemm_preset_json, py::arg("name"));
}

}  // namespace bitexact::python
