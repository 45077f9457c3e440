# MUFU (ex2/rcp) model: shipped tables, their errors, captured-sample replay,
# sweeps over every table entry. The raw captures (.captures/) are used when
# present; CI replays tests/data/mufu_samples.bxs.
bitexact_add_test_program(test_mufu test_mufu.cpp test_mufu_replay.cpp)
target_include_directories(test_mufu PRIVATE ${PROJECT_SOURCE_DIR}/tools)
target_compile_definitions(test_mufu PRIVATE BITEXACT_CAPTURE_DIR="${PROJECT_SOURCE_DIR}/.captures")
foreach(suite tables errors model trace replay sweep)
  add_test(NAME mufu_${suite} COMMAND test_mufu --test-suite=${suite})
endforeach()
