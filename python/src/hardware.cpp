// The GPU models over arrays: tensor-core products (mma of any shape, wgmma),
// the special-function unit (ex2, rcp, lg2) and the conversions (cvt).
#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <bitexact/hardware/alu.hpp>
#include <bitexact/hardware/gpu.hpp>
#include <bitexact/hardware/mma.hpp>
#include <bitexact/hardware/mufu.hpp>
#include <bitexact/trace/render.hpp>
#include <bitexact/trace/trace.hpp>

#include "binding.hpp"

namespace bitexact::python {
namespace {

// The unit an architecture of the GPU records (hardware/gpu.hpp) runs an input
// format on: mma.sync m16n8k16's for bf16 and fp16, on sm_90 wgmma k32's for
// e4m3 and e5m2 and k8's for tf32.
const fused_sum_unit& unit_named(std::string_view arch, std::string_view input_format) {
  return find_architecture(arch).mma_unit(format_named(input_format));
}

// The (input, accumulator) pairs whose units are measured, as format tags:
// bf16, fp16, tf32, e4m3 or e5m2 into fp32; fp16, e4m3 or e5m2 into fp16
// (cuda/capture's mma and wgmma captures). A and B share the format here.
template <class Fn>
decltype(auto) with_mma_formats(format in, format acc, Fn&& fn) {
  if (acc == fp32) {
    if (in == bf16) return fn(format_tag<bf16>{}, format_tag<fp32>{});
    if (in == fp16) return fn(format_tag<fp16>{}, format_tag<fp32>{});
    if (in == tf32) return fn(format_tag<tf32>{}, format_tag<fp32>{});
    if (in == e4m3) return fn(format_tag<e4m3>{}, format_tag<fp32>{});
    if (in == e5m2) return fn(format_tag<e5m2>{}, format_tag<fp32>{});
  } else if (acc == fp16) {
    if (in == fp16) return fn(format_tag<fp16>{}, format_tag<fp16>{});
    if (in == e4m3) return fn(format_tag<e4m3>{}, format_tag<fp16>{});
    if (in == e5m2) return fn(format_tag<e5m2>{}, format_tag<fp16>{});
  }
  throw std::invalid_argument("the tensor cores take bf16, fp16, tf32, e4m3 or e5m2 inputs into an fp32 accumulator, "
                              "or fp16, e4m3 or e5m2 into fp16; not " + std::string(name_of(in)) + " into " +
                              std::string(name_of(acc)));
}

// D = A B + C for A [m][k] (row-major), B given transposed as [n][k], C and
// D [m][n]: each output a fused_dot, the unit's chain of steps over k.
py::array mma(const py::array& a, const py::array& b_transposed, const py::array& c, std::size_t m, std::size_t n,
              std::size_t k, std::string_view input_format, std::string_view acc_format, std::string_view arch) {
  const fused_sum_unit& unit = unit_named(arch, input_format);
  return with_mma_formats(format_named(input_format), format_named(acc_format), [&](auto in_tag, auto acc_tag) {
    constexpr format In = decltype(in_tag)::fmt, Acc = decltype(acc_tag)::fmt;
    const value<In>* x = values_of<In>(a, "a", m * k);
    const value<In>* y = values_of<In>(b_transposed, "b", n * k);
    const value<Acc>* addend = values_of<Acc>(c, "c", m * n);
    auto out = new_values<Acc>(m * n);
    value<Acc>* d = writable_values_of<Acc>(out);
    {
      py::gil_scoped_release unlocked;
      for (std::size_t row = 0; row < m; ++row)
        for (std::size_t col = 0; col < n; ++col)
          d[row * n + col] = fused_dot(unit, std::span<const value<In>>(x + row * k, k),
                                       std::span<const value<In>>(y + col * k, k), addend[row * n + col])
                                 .result;
    }
    return py::array(out);
  });
}

// The fused steps of one output, D[row][col] = a_row . b_col + c, each traced
// and rendered in style: what fused_dot runs, one step at a time.
std::vector<std::string> mma_element_steps(const py::array& a_row, const py::array& b_col, std::uint32_t c,
                                           std::string_view input_format, std::string_view acc_format,
                                           std::string_view arch, std::string_view style_name) {
  const fused_sum_unit& unit = unit_named(arch, input_format);
  const auto style = output_style_from_name(style_name);
  if (!style) throw std::invalid_argument("unknown style " + quoted_input(style_name) + "; expected text, markdown, latex or json");
  return with_mma_formats(format_named(input_format), format_named(acc_format), [&](auto in_tag, auto acc_tag) {
    constexpr format In = decltype(in_tag)::fmt, Acc = decltype(acc_tag)::fmt;
    const std::size_t k = static_cast<std::size_t>(a_row.size());
    const std::span<const value<In>> x(values_of<In>(a_row, "a", k), k), y(values_of<In>(b_col, "b", k), k);
    std::vector<std::string> steps;
    value<Acc> accumulator = value<Acc>::from_bits(c);
    const auto step = static_cast<std::size_t>(unit.products_per_step);
    for (std::size_t first = 0; first < k; first += step) {
      const std::size_t n = std::min(step, k - first);
      const auto [result, record] = traced([&](auto& recorder) {
        return fused_multiply_add_step(unit, x.subspan(first, n), y.subspan(first, n), accumulator, recorder);
      });
      accumulator = result.result;
      steps.push_back(render(record, *style));
    }
    return steps;
  });
}

// wgmma.mma_async m64nNk16 for one N (a multiple of 8 from 8 to 256), through the library's wgmma_m64nNk16.
template <format In, format Acc, std::size_t N>
void wgmma_for(const value<In>* a, const value<In>* b_transposed, const value<Acc>* c, value<Acc>* d) {
  wgmma_m64nNk16<Acc, In, N>(sm90_tensor_core, std::span<const value<In>, 64 * 16>(a, 64 * 16),
                             std::span<const value<In>, N * 16>(b_transposed, N * 16),
                             std::span<const value<Acc>, 64 * N>(c, 64 * N), std::span<value<Acc>, 64 * N>(d, 64 * N));
}

template <format In, format Acc, std::size_t... Eighths>
void wgmma_dispatch(std::size_t n, const value<In>* a, const value<In>* b, const value<Acc>* c, value<Acc>* d,
                    std::index_sequence<Eighths...>) {
  ((n == (Eighths + 1) * 8 ? (wgmma_for<In, Acc, (Eighths + 1) * 8>(a, b, c, d), true) : false) || ...);
}

py::array wgmma(const py::array& a, const py::array& b_transposed, const py::array& c, std::size_t n,
                std::string_view input_format, std::string_view acc_format) {
  if (n < 8 || n > 256 || n % 8 != 0)
    throw std::invalid_argument("wgmma: N is a multiple of 8 from 8 to 256, not " + std::to_string(n));
  const format in = format_named(input_format), acc = format_named(acc_format);
  // wgmma's k is 16 for 16-bit inputs only (tf32 takes k 8, fp8 k 32).
  if (!((in == bf16 && acc == fp32) || (in == fp16 && (acc == fp32 || acc == fp16))))
    throw std::invalid_argument("wgmma m64nNk16 takes bf16 into fp32, or fp16 into fp32 or fp16; not " +
                                std::string(name_of(in)) + " into " + std::string(name_of(acc)));
  return with_mma_formats(in, acc, [&](auto in_tag, auto acc_tag) {
    constexpr format In = decltype(in_tag)::fmt, Acc = decltype(acc_tag)::fmt;
    if constexpr (In == bf16 || In == fp16) {
      const value<In>* x = values_of<In>(a, "a", 64 * 16);
      const value<In>* y = values_of<In>(b_transposed, "b", n * 16);
      const value<Acc>* addend = values_of<Acc>(c, "c", 64 * n);
      auto out = new_values<Acc>(64 * n);
      value<Acc>* d = writable_values_of<Acc>(out);
      {
        py::gil_scoped_release unlocked;
        wgmma_dispatch<In, Acc>(n, x, y, addend, d, std::make_index_sequence<32>{});
      }
      return py::array(out);
    } else {
      return py::array();  // refused above
    }
  });
}

// The special-function unit on fp32 bit patterns.
py::array mufu(std::string_view function, const py::array& x) {
  using fn = float32 (*)(float32);
  static constexpr std::array<std::pair<std::string_view, fn>, 6> functions{{
      {"ex2_approx", [](float32 v) { return ptx::ex2_approx(v); }},
      {"ex2_approx_ftz", [](float32 v) { return ptx::ex2_approx_ftz(v); }},
      {"rcp_approx", [](float32 v) { return ptx::rcp_approx(v); }},
      {"rcp_approx_ftz", [](float32 v) { return ptx::rcp_approx_ftz(v); }},
      {"lg2_approx", [](float32 v) { return ptx::lg2_approx(v); }},
      {"lg2_approx_ftz", [](float32 v) { return ptx::lg2_approx_ftz(v); }},
  }};
  fn chosen = nullptr;
  for (const auto& [name, f] : functions)
    if (name == function) chosen = f;
  if (!chosen) throw std::invalid_argument("unknown MUFU function " + quoted_input(function));
  const std::size_t count = static_cast<std::size_t>(x.size());
  const float32* in = values_of<fp32>(x, "x", count);
  auto out = new_values<fp32>(count);
  float32* result = writable_values_of<fp32>(out);
  ptx::mufu_tables::shared();  // loads the tables (or throws) while the GIL is held
  {
    py::gil_scoped_release unlocked;
    for (std::size_t i = 0; i < count; ++i) result[i] = chosen(in[i]);
  }
  return py::array(out);
}

// The conversions by their PTX names; the x2 forms pack hi into the upper half.
py::array cvt(std::string_view instruction, const py::array& x, const py::object& lo) {
  const std::size_t count = static_cast<std::size_t>(x.size());
  const float32* in = values_of<fp32>(x, "x", count);
  const auto one = [&](auto convert_one) {
    using R = decltype(convert_one(float32{}));
    auto out = new_values<R::fmt>(count);
    R* result = writable_values_of<R::fmt>(out);
    {
      py::gil_scoped_release unlocked;
      for (std::size_t i = 0; i < count; ++i) result[i] = convert_one(in[i]);
    }
    return py::array(out);
  };
  const auto packed = [&](auto pack) {
    if (lo.is_none()) throw std::invalid_argument(std::string(instruction) + " packs two values: pass lo");
    const float32* low = values_of<fp32>(lo.cast<py::array>(), "lo", count);
    py::array_t<std::uint32_t> out(static_cast<py::ssize_t>(count));
    std::uint32_t* result = out.mutable_data();
    {
      py::gil_scoped_release unlocked;
      for (std::size_t i = 0; i < count; ++i) result[i] = pack(in[i], low[i]);
    }
    return py::array(out);
  };
  if (instruction == "cvt.rn.bf16x2.f32") return packed(ptx::cvt_rn_bf16x2_f32);
  if (instruction == "cvt.rn.f16x2.f32") return packed(ptx::cvt_rn_f16x2_f32);
  if (!lo.is_none()) throw std::invalid_argument(std::string(instruction) + " converts one value: lo is for the x2 forms");
  if (instruction == "cvt.rn.bf16.f32") return one(ptx::cvt_rn_bf16_f32);
  if (instruction == "cvt.rz.bf16.f32") return one(ptx::cvt_rz_bf16_f32);
  if (instruction == "cvt.rn.satfinite.bf16.f32") return one(ptx::cvt_rn_satfinite_bf16_f32);
  if (instruction == "cvt.rn.relu.bf16.f32") return one(ptx::cvt_rn_relu_bf16_f32);
  if (instruction == "cvt.rn.f16.f32") return one(ptx::cvt_rn_f16_f32);
  throw std::invalid_argument("unknown conversion " + quoted_input(instruction) +
                              "; expected cvt.rn.bf16.f32, cvt.rz.bf16.f32, cvt.rn.satfinite.bf16.f32, "
                              "cvt.rn.relu.bf16.f32, cvt.rn.f16.f32, cvt.rn.bf16x2.f32 or cvt.rn.f16x2.f32");
}

}  // namespace

void register_hardware(py::module_& m) {
  m.def("_mma", &mma, py::arg("a"), py::arg("b_transposed"), py::arg("c"), py::arg("m"), py::arg("n"), py::arg("k"),
        py::arg("input_format"), py::arg("acc_format"), py::arg("arch"));
  m.def("_mma_element_steps", &mma_element_steps, py::arg("a_row"), py::arg("b_col"), py::arg("c"),
        py::arg("input_format"), py::arg("acc_format"), py::arg("arch"), py::arg("style"));
  m.def("_wgmma", &wgmma, py::arg("a"), py::arg("b_transposed"), py::arg("c"), py::arg("n"),
        py::arg("input_format"), py::arg("acc_format"));
  m.def("_mufu", &mufu, py::arg("function"), py::arg("x"));
  m.def("_cvt", &cvt, py::arg("instruction"), py::arg("x"), py::arg("lo"));
}

}  // namespace bitexact::python
