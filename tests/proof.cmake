# The independent proof of the core arithmetic against tests/oracle (see docs/proof.md).
bitexact_add_test_program(test_proof
  test_proof_fp8.cpp test_proof_convert.cpp test_proof_fp32.cpp test_env_flags.cpp)
target_include_directories(test_proof PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
add_test(NAME proof_fp8 COMMAND test_proof -ts=proof_fp8)
add_test(NAME proof_convert COMMAND test_proof -ts=proof_convert)
add_test(NAME proof_bf16_fp16 COMMAND test_proof -ts=proof_bf16_fp16)
add_test(NAME proof_fp32 COMMAND test_proof -ts=proof_fp32)
add_test(NAME proof_env COMMAND test_proof -ts=proof_env)
# The sweeps take minutes under the sanitizers: the sanitize preset skips the
# "sweep" label and keeps the targeted tests (proof_env).
set_tests_properties(proof_fp8 proof_convert proof_bf16_fp16 proof_fp32 PROPERTIES LABELS sweep)

# The long sweeps: always built, registered as tests (label "exhaustive") only
# when -DBITEXACT_EXHAUSTIVE=ON, so a plain `ctest` never starts them.
option(BITEXACT_EXHAUSTIVE "Register the exhaustive proof sweeps (hours of CPU) with ctest" OFF)
bitexact_add_test_program(test_proof_exhaustive test_proof_exhaustive.cpp)
target_include_directories(test_proof_exhaustive PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
find_package(Threads REQUIRED)
target_link_libraries(test_proof_exhaustive PRIVATE Threads::Threads)
if(BITEXACT_EXHAUSTIVE)
  # Each item is the start of test case names, up to the colon ("bf16 add:"
  # is not "bf16 add_each:").
  foreach(sweep "bf16 add:" "bf16 sub:" "bf16 mul:" "bf16 add_each:" "bf16 sub_each:" "bf16 mul_each:" "fp16 add:"
                "fp16 mul:" "fp32 to bf16:" "fp32 to fp16:" "fp32 arithmetic:")
    string(REGEX REPLACE "[^a-z0-9]+" "_" test_name "${sweep}")
    string(REGEX REPLACE "_$" "" test_name "${test_name}")
    add_test(NAME proof_exhaustive_${test_name} COMMAND test_proof_exhaustive "-tc=${sweep}*")
    set_tests_properties(proof_exhaustive_${test_name} PROPERTIES LABELS exhaustive TIMEOUT 0)
  endforeach()
endif()
