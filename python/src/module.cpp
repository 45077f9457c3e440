// The compiled half of `import bitexact`: bitexact/_bitexact. Its functions
// (all named with a leading underscore) take flat arrays of bit patterns and
// names; bitexact/__init__.py is the API that people call.
#include "binding.hpp"

PYBIND11_MODULE(_bitexact, m) {
  using namespace bitexact::python;
  m.doc() = "bitexact's C++ library, for bitexact/__init__.py";
  // pybind11 turns std::invalid_argument (what a caller passed wrong) into ValueError.
  register_values(m);
  register_elementwise(m);
  register_traces(m);
  register_hardware(m);
  register_attention(m);
  register_matmul(m);
}
