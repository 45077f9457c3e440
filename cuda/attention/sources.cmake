# Our flash-attention forward kernels and their host API (flash_call.h), for
# every target that builds them: cuda/CMakeLists.txt (compiled wherever nvcc
# is, CI too) and the PyTorch operators (cmake/torch.cmake).
set(BITEXACT_FLASH_KERNEL_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/flash_call.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flash_forward.cu
  ${CMAKE_CURRENT_LIST_DIR}/flash_forward_wgmma.cu
  ${CMAKE_CURRENT_LIST_DIR}/fp8_value_layout.cu)
