# The flash-attention emulator against PyTorch's flash backend: the captured
# heads and the kernel survey in tests/data/attention, one row's record and
# one element's traced roundings; the paper_reference presets against bits
# derived by hand and a host-float implementation.
bitexact_add_test_program(test_attention test_attention_replay.cpp test_attention_stabilized.cpp
                          test_attention_explain.cpp test_attention_paper_reference.cpp
                          test_attention_cumulative_error.cpp test_synthetic_heads.cpp)
target_include_directories(test_attention PRIVATE ${PROJECT_SOURCE_DIR}/src)
add_test(NAME attention_replay COMMAND test_attention)
