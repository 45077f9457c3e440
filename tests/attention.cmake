# The kernel descriptions (JSON, the registry) and the Triton kernels' captures in tests/data/attention_backends;
# the flash backward's in tests/data/attention_backward.
# The flash-attention emulator against PyTorch's flash backend: the captured
# heads and the kernel survey in tests/data/attention, one row's record and
# one element's traced roundings; the paper_reference presets against bits
# derived by hand and a host-float implementation.
bitexact_add_test_program(test_attention test_attention_replay.cpp test_attention_stabilized.cpp
                          test_attention_explain.cpp test_attention_paper_reference.cpp
                          test_attention_cumulative_error.cpp test_attention_rounding_sites.cpp
                          test_attention_repeated_max.cpp test_synthetic_heads.cpp test_attention_kernels.cpp
                          test_attention_backward.cpp test_attention_call.cpp test_attention_fp8.cpp
                          test_attention_fp8_flash.cpp)
# test_synthetic_heads.cpp checks the arithmetic of `bias statistics` (src/bias_statistics.hpp).
target_include_directories(test_attention PRIVATE ${PROJECT_SOURCE_DIR}/src)
add_test(NAME attention_replay COMMAND test_attention --test-case-exclude=rounding\ sites:*,backward:*)
# PyTorch's flash backward against its captures (tests/data/attention_backward).
add_test(NAME attention_backward_replay COMMAND test_attention --test-case=backward:*)
# The rounding-site row model (attention/rounding_sites.hpp), in a wide binary type.
add_test(NAME attention_rounding_sites COMMAND test_attention --test-case=rounding\ sites:*)
# The leading indicator's P-bar = 1 interval against every fp32 input (about a minute on 2 cores).
add_test(NAME attention_p_bar_one_sweep COMMAND test_attention "-tc=P-bar is 1 exactly*")
set_tests_properties(attention_p_bar_one_sweep PROPERTIES LABELS exhaustive ENVIRONMENT BITEXACT_P_BAR_SWEEP=all TIMEOUT 0)
# Every field of every GPU preset's description changes the bits on a probe call or is refused, naming it.
bitexact_add_test_program(test_attention_kernel_fields test_attention_kernel_fields.cpp)
add_test(NAME attention_kernel_fields COMMAND test_attention_kernel_fields)
# Over a thousand emulator calls (about 1.5 minutes here): the sanitize preset skips the "sweep" label;
# attention_replay runs the same code under the sanitizers.
set_tests_properties(attention_kernel_fields PROPERTIES LABELS sweep)
