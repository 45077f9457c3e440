# bitexact.torch (python/bitexact/torch.py): our flash-attention kernels as
# PyTorch operators (python/src/torch_ops.cpp), the module _bitexact_torch
# beside _bitexact, built when nvcc and PyTorch are found. Without them the
# package builds as before and bitexact.torch says in one line how to get them.
#
# PyTorch is asked of the interpreter the module is built for, with
# PYTHONPATH and PYTHONNOUSERSITE unset: pip's isolated build environment
# hides the installed packages through those two, and the operators must be
# built against the PyTorch they will be loaded into. Its headers and
# libraries are used directly (its CMake package wants more of the CUDA
# toolkit than the operators need).
option(BITEXACT_BUILD_TORCH "Build bitexact.torch, the GPU kernels as PyTorch operators, when nvcc and PyTorch are found" ON)

function(bitexact_torch_unavailable reason)
  message(STATUS "bitexact.torch (the GPU kernels as PyTorch operators) is not built: ${reason}")
endfunction()

# Included at python/'s file scope (enable_language must be): returns early when something is missing.
if(NOT BITEXACT_BUILD_TORCH)
  bitexact_torch_unavailable("BITEXACT_BUILD_TORCH is OFF")
  return()
endif()
include(CheckLanguage)
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  bitexact_torch_unavailable("nvcc not found")
  return()
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env --unset=PYTHONPATH --unset=PYTHONNOUSERSITE ${Python3_EXECUTABLE} -c
          "import os, torch; print(os.path.dirname(torch.__file__)); print(int(torch._C._GLIBCXX_USE_CXX11_ABI)); print(torch.__version__); print(torch.version.cuda)"
  RESULT_VARIABLE _torch_status OUTPUT_VARIABLE _torch_answer OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT _torch_status EQUAL 0)
  bitexact_torch_unavailable("PyTorch is not importable by ${Python3_EXECUTABLE}")
  return()
endif()
string(REPLACE "\n" ";" _torch_answer "${_torch_answer}")
list(GET _torch_answer 0 _torch_dir)
list(GET _torch_answer 1 _torch_cxx11_abi)
list(GET _torch_answer 2 _torch_version)
list(GET _torch_answer 3 _torch_cuda)
if(_torch_cuda STREQUAL "None")
  bitexact_torch_unavailable("PyTorch ${_torch_version} (${_torch_dir}) is built without CUDA")
  return()
endif()
# The backward is PyTorch's flash backward, called with the signature it has had since PyTorch 2.3.
set(_torch_backward_header ${_torch_dir}/include/ATen/ops/_scaled_dot_product_flash_attention_backward.h)
if(EXISTS ${_torch_backward_header})
  file(STRINGS ${_torch_backward_header} _torch_backward REGEX "philox_offset, ::std::optional<double> scale")
endif()
if(NOT _torch_backward)
  bitexact_torch_unavailable("PyTorch ${_torch_version} (${_torch_dir}) lacks the flash backward the operators call "
                             "(PyTorch 2.3 or later has it)")
  return()
endif()

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)
message(STATUS "bitexact.torch: for PyTorch ${_torch_version} (${_torch_dir}), nvcc ${CMAKE_CUDA_COMPILER_VERSION}")
include(${PROJECT_SOURCE_DIR}/cuda/attention/sources.cmake)
add_library(_bitexact_torch MODULE ${PROJECT_SOURCE_DIR}/python/src/torch_ops.cpp ${BITEXACT_FLASH_KERNEL_SOURCES})
# The kernels' wgmma and copy-engine instructions are Hopper's (sm_90a); nvcc's C++17 suffices for them.
set_target_properties(_bitexact_torch PROPERTIES PREFIX "" CUDA_ARCHITECTURES 90a-real CUDA_STANDARD 17
                      CUDA_RUNTIME_LIBRARY Shared LIBRARY_OUTPUT_DIRECTORY ${BITEXACT_PYTHON_PACKAGE_DIR}
                      # Loaded into a process that has imported torch: its libraries are found there.
                      SKIP_BUILD_RPATH ON INSTALL_RPATH "")
target_include_directories(_bitexact_torch SYSTEM PRIVATE ${_torch_dir}/include
                           ${_torch_dir}/include/torch/csrc/api/include)
target_compile_definitions(_bitexact_torch PRIVATE _GLIBCXX_USE_CXX11_ABI=${_torch_cxx11_abi})
target_compile_options(_bitexact_torch PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-O3> $<$<COMPILE_LANGUAGE:CXX>:-Wall>)
foreach(_library c10 torch torch_cpu torch_cuda c10_cuda)
  target_link_libraries(_bitexact_torch PRIVATE ${_torch_dir}/lib/lib${_library}.so)
endforeach()
target_link_libraries(_bitexact_torch PRIVATE CUDA::cudart)
# The operators must share PyTorch's libstdc++: where the toolchain has only libstdc++.a to link (the
# device machine's image has no libstdc++.so), the module would carry a static copy with its own locale,
# and an error message that formats a number crashes in it. The versioned runtime library is always there.
target_link_libraries(_bitexact_torch PRIVATE -l:libstdc++.so.6)
install(TARGETS _bitexact_torch LIBRARY DESTINATION bitexact COMPONENT python)
