# The worked example of docs/unit-testing-kernels.md (examples/kernel_testing):
# a kernel with a planted bug (the softmax scale fused into one FFMA) run on a
# captured PyTorch head, then caught by `bitexact attention` and by the C++
# unit test written with testing/check.hpp, while PyTorch's own GPU output
# passes both. The counts are the page's: 4 of the head's 64,000 elements
# differ, the first O[150, 57] (flat index 9657 = 150 x 64 + 57), where the
# model's float32 sum 0x3D5A8001 lies one float32 ulp above the tie between
# bf16 0x3D5A and 0x3D5B, so a kernel whose sum came out one step lower
# rounds down instead of up (the traces in the output show both values).
if(NOT TARGET fused_scale_kernel OR NOT TARGET check_flash_head)
  return()
endif()

set(head ${PROJECT_SOURCE_DIR}/tests/data/attention/split_d64_n1000_full_special_h0)
set(kernel_o ${CMAKE_CURRENT_BINARY_DIR}/fused_scale_kernel_o.npy)

add_test(NAME kernel_testing_planted_bug_writes_o
         COMMAND fused_scale_kernel ${head}/q.npy ${head}/k.npy ${head}/v.npy 1,4 ${kernel_o})
set_tests_properties(kernel_testing_planted_bug_writes_o PROPERTIES FIXTURES_SETUP planted_bug)

# bitexact_kernel_test(name TARGET t ARGS ... RC n CONTAINS ...): the cli driver on another program.
function(bitexact_kernel_test name)
  cmake_parse_arguments(T "" "TARGET;RC" "ARGS;CONTAINS" ${ARGN})
  list(JOIN T_ARGS "|" joined)
  list(JOIN T_CONTAINS "@@" contains)
  add_test(NAME kernel_testing_${name}
           COMMAND ${CMAKE_COMMAND} -DBINARY=$<TARGET_FILE:${T_TARGET}> "-DARGS=${joined}" -DRC=${T_RC}
                   "-DCONTAINS=${contains}" -P ${BITEXACT_CLI_DRIVER})
  set_tests_properties(kernel_testing_${name} PROPERTIES FIXTURES_REQUIRED planted_bug)
endfunction()

set(qkv ${head}/q.npy ${head}/k.npy ${head}/v.npy)
bitexact_kernel_test(attention_passes_pytorch_output TARGET bitexact_cli RC 0
  ARGS attention ${qkv} --batch-heads 1,4 --expect-o ${head}/o.npy
  CONTAINS "O: 64000 elements compared, 0 mismatches")
bitexact_kernel_test(attention_catches_fused_scale TARGET bitexact_cli RC 1
  ARGS attention ${qkv} --batch-heads 1,4 --expect-o ${kernel_o}
  CONTAINS "O: 64000 elements compared, 4 mismatches" "first mismatch in O at [150, 57] (row, col)"
           "file     0x3D5A (0.05322265625)" "model    0x3D5B (0.053466796875)"
           "combine fma      fp32:0x3D5A8001" "lies 1 float32 ulp (1.53e-05 bf16 ulp) above them")
bitexact_kernel_test(check_passes_pytorch_output TARGET check_flash_head RC 0
  ARGS ${qkv} ${head}/o.npy 1,4
  CONTAINS "64000 elements compared, all bit-identical to the model")
bitexact_kernel_test(check_catches_fused_scale TARGET check_flash_head RC 1
  ARGS ${qkv} ${kernel_o} 1,4
  CONTAINS "4 of 64000 elements differ from the model; first at index 9657"
           "indices: 9657 19661 28056 63970" "a            fp32:0x3D5A8001" "first mismatch: O[150, 57] (row, col)")
