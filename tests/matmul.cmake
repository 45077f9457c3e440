# The GEMM emulator (include/bitexact/matmul/) against the tensor-core model it is built from.
bitexact_add_test_program(test_matmul test_matmul.cpp)
add_test(NAME matmul COMMAND test_matmul)
