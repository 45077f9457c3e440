# Trace records, their renderers, the fmt formatters and the buffer check helper.
bitexact_add_test_program(test_trace test_trace.cpp test_check.cpp)
add_test(NAME trace_golden_and_renderers COMMAND test_trace --test-suite=trace)
add_test(NAME trace_check_helper COMMAND test_trace --test-suite=check)
