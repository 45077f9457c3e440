bitexact_add_test_program(test_hardware test_hardware_models.cpp)
add_test(NAME hardware_models COMMAND test_hardware)

# Real GPU results (tests/data, see its README) replayed through the models.
bitexact_add_test_program(test_hardware_replay test_hardware_replay.cpp)
target_include_directories(test_hardware_replay PRIVATE ${PROJECT_SOURCE_DIR}/tools)
add_test(NAME hardware_replay COMMAND test_hardware_replay)

# The fast mma_m16n8k16 against the generic fused_dot, bit for bit (20000 tiles
# per format pair and unit; the sweep, under the exhaustive label, runs 10^6).
bitexact_add_test_program(test_mma_fast_path test_mma_fast_path.cpp)
add_test(NAME mma_fast_path COMMAND test_mma_fast_path)
add_test(NAME mma_fast_path_sweep COMMAND test_mma_fast_path)
set_tests_properties(mma_fast_path_sweep PROPERTIES LABELS exhaustive ENVIRONMENT BITEXACT_MMA_TILES=1000000 TIMEOUT 0)

# Traces of a tensor-core step: the worked example of docs/hardware.md.
bitexact_add_test_program(test_mma_trace test_mma_trace.cpp)
add_test(NAME mma_trace COMMAND test_mma_trace)
