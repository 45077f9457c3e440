# Trace records, their renderers, the fmt formatters and the buffer check helper.
bitexact_add_test_program(test_trace test_trace.cpp test_check.cpp)
add_test(NAME trace_golden_and_renderers COMMAND test_trace --test-suite=trace)
add_test(NAME trace_check_helper COMMAND test_trace --test-suite=check)
# A signed buffer of F's width (int32_t for fp32) does not compile, and the message says so and what to pass.
add_test(NAME trace_check_signed_buffer
  COMMAND ${CMAKE_CXX_COMPILER} -std=c++20 -fsyntax-only -I ${PROJECT_SOURCE_DIR}/include -DFMT_HEADER_ONLY
          ${CMAKE_CURRENT_SOURCE_DIR}/check_signed_buffer.cpp)
set_tests_properties(trace_check_signed_buffer PROPERTIES
  PASS_REGULAR_EXPRESSION "static assertion failed: check_against_model<F>: the buffer holds signed integers[^\n]*Pass the same memory as the unsigned integer of that width: std::uint32_t for fp32"
  FAIL_REGULAR_EXPRESSION "wider element")
