// What the parts of the _bitexact extension share: runtime names to the
// library's types and NumPy arrays of bit patterns as spans (the formats a
// call may mix and round into: core/dispatch.hpp).
//
// The extension is the thin, typed layer: bitexact/__init__.py checks the
// caller's arrays (dtype, shape, broadcasting) and names, and hands over flat
// C-contiguous arrays of unsigned bit patterns. The checks here repeat the
// ones whose failure would read or write out of bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <bitexact/core/dispatch.hpp>
#include <bitexact/core/environment.hpp>
#include <bitexact/core/format.hpp>
#include <bitexact/core/names.hpp>
#include <bitexact/trace/parse.hpp>

namespace bitexact::python {

namespace py = pybind11;

format format_named(std::string_view name);
rounding_mode rounding_named(std::string_view name);

// The environment of one call, from the keyword arguments of the Python API.
environment environment_of(std::string_view rounding, std::string_view tiny, bool flush_to_zero,
                           bool denormals_are_zero, std::string_view nans);

// Bytes one element of f takes in its NumPy array (uint8, uint16, uint32).
inline std::size_t storage_bytes(format f) { return f.width() <= 8 ? 1 : f.width() <= 16 ? 2 : 4; }

// The elements of a flat, C-contiguous array of count bit patterns of F, read as value<F>.
template <format F>
const value<F>* values_of(const py::array& array, const char* what, std::size_t count) {
  static_assert(sizeof(value<F>) == sizeof(typename value<F>::storage), "value<F> is its bit pattern");
  if (array.ndim() != 1 || !(array.flags() & py::array::c_style) ||
      static_cast<std::size_t>(array.itemsize()) != sizeof(value<F>) || static_cast<std::size_t>(array.size()) != count)
    throw std::invalid_argument(std::string(what) + ": expected a flat contiguous array of " + std::to_string(count) +
                                " " + std::to_string(8 * sizeof(value<F>)) + "-bit patterns of " +
                                std::string(name_of(F)));
  return static_cast<const value<F>*>(array.data());
}

// A fresh flat array of count patterns of F (its unsigned storage type).
template <format F>
py::array_t<typename value<F>::storage> new_values(std::size_t count) {
  return py::array_t<typename value<F>::storage>(static_cast<py::ssize_t>(count));
}

template <format F>
value<F>* writable_values_of(py::array_t<typename value<F>::storage>& array) {
  return reinterpret_cast<value<F>*>(array.mutable_data());
}

// The registration functions of the extension's parts (module.cpp calls them).
void register_values(py::module_& m);
void register_elementwise(py::module_& m);
void register_traces(py::module_& m);
void register_hardware(py::module_& m);
void register_attention(py::module_& m);
void register_matmul(py::module_& m);

}  // namespace bitexact::python
