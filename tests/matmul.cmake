# The GEMM emulator (include/bitexact/matmul/) against the tensor-core model it
# is built from, and against cuBLAS's products captured in tests/data/matmul.
bitexact_add_test_program(test_matmul test_matmul.cpp test_matmul_replay.cpp test_matmul_triton.cpp)
add_test(NAME matmul COMMAND test_matmul)
