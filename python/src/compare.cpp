// The IEEE comparison predicates over arrays.
#include "elementwise.hpp"

namespace bitexact::python {

py::tuple run_compare(std::string_view predicate, bool signaling, const operand_arrays& operands,
                      const operand_formats& formats, const elementwise_call& call) {
  if (predicate != "equal" && predicate != "less" && predicate != "less_equal")
    throw std::invalid_argument("unknown comparison " + quoted_input(predicate) + "; expected equal, less or less_equal");
  return with_operand_pair(formats[0], formats[1], [&](auto a_tag, auto b_tag) {
    constexpr format A = decltype(a_tag)::fmt, B = decltype(b_tag)::fmt;
    const value<A>* a = values_of<A>(operands[0], "a", call.count);
    const value<B>* b = values_of<B>(operands[1], "b", call.count);
    py::array_t<bool> out(static_cast<py::ssize_t>(call.count));
    bool* holds = out.mutable_data();
    std::uint8_t* element_flags = call.element_flag_bits;
    flags raised;
    {
      py::gil_scoped_release unlocked;
      for (std::size_t i = 0; i < call.count; ++i) {
        flags own;
        holds[i] = predicate == "equal" ? equal(a[i], b[i], own, call.env, signaling)
                   : predicate == "less" ? less(a[i], b[i], own, call.env, signaling)
                                         : less_equal(a[i], b[i], own, call.env, signaling);
        if (element_flags) element_flags[i] = own.bits;
        raised |= own;
      }
    }
    return elementwise_result(out, raised, call);
  });
}

}  // namespace bitexact::python
