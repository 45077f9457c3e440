// The compiled half of `import bitexact`: bitexact/_bitexact. Its functions
// (all named with a leading underscore) take flat arrays of bit patterns and
// names; bitexact/__init__.py is the API that people call.
#include "binding.hpp"

#include <cstdlib>
#include <string>

PYBIND11_MODULE(_bitexact, m) {
  using namespace bitexact::python;
  m.doc() = "bitexact's C++ library, for bitexact/__init__.py";
#if PYBIND11_VERSION_MAJOR == 2 && PYBIND11_VERSION_MINOR < 12
  // pybind11 before 2.12 reads NumPy's array descriptors in NumPy 1's layout (cmake/python.cmake
  // checks the interpreter it configures for): under NumPy 2 every call with an array would fail
  // with a misleading complaint about the array's layout, so the import says why instead.
  const auto numpy = pybind11::module_::import("numpy").attr("__version__").cast<std::string>();
  if (std::atoi(numpy.c_str()) >= 2)
    throw pybind11::import_error("bitexact: this module was built with pybind11 2." PYBIND11_TOSTRING(
                                     PYBIND11_VERSION_MINOR) ", which cannot read the arrays of NumPy " + numpy +
                                 " (2.12 or later can): build it for this interpreter (pip install .) or use NumPy 1");
#endif
  // pybind11 turns std::invalid_argument (what a caller passed wrong) into ValueError.
  register_values(m);
  register_elementwise(m);
  register_traces(m);
  register_hardware(m);
  register_attention(m);
  register_matmul(m);
}
