# MUFU (ex2/rcp/lg2) model: shipped tables, their errors, captured-sample
# replay, sweeps over every table entry. CI replays tests/data/mufu_samples.bxs
# and tests/data/ops_lg2.bin; the raw captures (.captures/, not in the
# repository) are compared by mufu_captures and mufu_lg2_captures, which ctest
# reports as skipped when they are absent.
bitexact_add_test_program(test_mufu test_mufu.cpp test_mufu_replay.cpp test_mufu_lg2.cpp)
target_include_directories(test_mufu PRIVATE ${PROJECT_SOURCE_DIR}/tools)
target_compile_definitions(test_mufu PRIVATE BITEXACT_CAPTURE_DIR="${PROJECT_SOURCE_DIR}/.captures")
foreach(suite tables errors model trace replay sweep captures lg2 lg2_captures)
  add_test(NAME mufu_${suite} COMMAND test_mufu --test-suite=${suite})
endforeach()
set_tests_properties(mufu_captures mufu_lg2_captures PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED: no raw captures")
