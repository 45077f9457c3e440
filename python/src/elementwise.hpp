// The loop behind every elementwise function of the module: each element
// rounded by the library's own operation, with the GIL released. A call
// without per-element random bits or flags over add, sub or mul goes through
// the library's buffer path (add_each and its kin, host/elementwise.hpp),
// which rounds whole buffers in the host's vector lanes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <bitexact/core/operations.hpp>

#include "binding.hpp"

namespace bitexact::python {

// What a call asks besides its operands: the environment, fresh random bits
// per element (stochastic rounding), and whether to return each element's flags.
struct elementwise_call {
  std::size_t count = 0;
  environment env;
  const std::uint32_t* random_bits = nullptr;  // count of them, or none
  std::optional<py::array_t<std::uint8_t>> element_flags;  // when asked: one flags byte per element
  std::uint8_t* element_flag_bits = nullptr;               // its data

  // The keyword arguments of the Python functions; random_bits is None or a
  // flat uint32 array of count elements.
  elementwise_call(std::size_t count_, std::string_view rounding, std::string_view tiny, bool flush_to_zero,
                   bool denormals_are_zero, std::string_view nans, const py::object& random_bits_, bool want_flags);
};

// The Python result: (out, ORed flags as an int, per-element flags or None).
py::tuple elementwise_result(py::array out, flags raised, const elementwise_call& call);

// out[i] = one(i, env) for every element, env carrying element i's random
// bits; returns the OR of the flags and records each element's when asked.
template <format R, class One>
flags each_element(const elementwise_call& call, value<R>* out, One&& one) {
  py::gil_scoped_release unlocked;
  std::uint8_t* element_flags = call.element_flag_bits;
  environment env = call.env;
  flags raised;
  for (std::size_t i = 0; i < call.count; ++i) {
    if (call.random_bits) env.random_bits = call.random_bits[i];
    const rounded<R> r = one(i, env);
    out[i] = r.result;
    if (element_flags) element_flags[i] = r.raised.bits;
    raised |= r.raised;
  }
  return raised;
}

// The same through the library's buffer path, when the call needs nothing per element.
template <format R, class One, class Whole>
flags each_element(const elementwise_call& call, value<R>* out, One&& one, Whole&& whole) {
  if (call.random_bits || call.element_flags) return each_element<R>(call, out, std::forward<One>(one));
  py::gil_scoped_release unlocked;
  return whole(call.env);
}

// A two-operand function over arrays: a and b read as the call's operand
// formats, z a new result array; body(r_tag, a, b, z) fills z and returns the
// ORed flags.
template <class Body>
py::tuple two_operand_arrays(const std::vector<py::array>& operands, const std::vector<format>& formats, format result,
                             const elementwise_call& call, Body&& body) {
  return with_operation_formats(formats[0], formats[1], result, [&](auto a_tag, auto b_tag, auto r_tag) {
    constexpr format A = decltype(a_tag)::fmt, B = decltype(b_tag)::fmt, R = decltype(r_tag)::fmt;
    const std::span<const value<A>> a(values_of<A>(operands[0], "a", call.count), call.count);
    const std::span<const value<B>> b(values_of<B>(operands[1], "b", call.count), call.count);
    auto out = new_values<R>(call.count);
    const std::span<value<R>> z(writable_values_of<R>(out), call.count);
    return elementwise_result(out, body(r_tag, a, b, z), call);
  });
}

// The operations, one translation unit per group: each instantiates them for
// every supported mix of formats, which is slow to compile. operands holds as
// many flat arrays as the operation takes, formats their formats.
using operand_arrays = std::vector<py::array>;
using operand_formats = std::vector<format>;
py::tuple run_add_sub(operation op, const operand_arrays& operands, const operand_formats& formats, format result,
                      const elementwise_call& call);
py::tuple run_mul_div(operation op, const operand_arrays& operands, const operand_formats& formats, format result,
                      const elementwise_call& call);
py::tuple run_fma(const operand_arrays& operands, const operand_formats& formats, format result,
                  const elementwise_call& call);
py::tuple run_sqrt_convert(operation op, const operand_arrays& operands, const operand_formats& formats,
                           format result, const elementwise_call& call);
// equal, less, less_equal (predicate) over arrays: (bool array, ORed flags, per-element flags or None).
py::tuple run_compare(std::string_view predicate, bool signaling, const operand_arrays& operands,
                      const operand_formats& formats, const elementwise_call& call);

}  // namespace bitexact::python
