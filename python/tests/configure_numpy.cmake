# What configuring says about the Python module, run as
#   cmake -DSOURCE_DIR=... -DSCRATCH=dir -DPYTHON=... -DPYBIND11_DIR=... -DPYBIND11_VERSION=... -P configure_numpy.cmake
# Configures the project (the module alone, nothing else) three times in SCRATCH:
#   1. with the interpreter's own NumPy: one line names the interpreter and how to use the module;
#   2. and 3. with a stand-in NumPy 2.0.0 first on PYTHONPATH: pybind11 before 2.12 cannot read NumPy 2's
#      arrays, so the module is left out by default and refused when asked for, each in one line naming the
#      fix; with pybind11 2.12 or later the module is built as in 1.
foreach(required SOURCE_DIR SCRATCH PYTHON PYBIND11_DIR PYBIND11_VERSION)
  if(NOT DEFINED ${required})
    message(FATAL_ERROR "configure_numpy.cmake: -D${required}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE ${SCRATCH})
file(WRITE ${SCRATCH}/numpy2/numpy/__init__.py "__version__ = '2.0.0'  # a stand-in: only the version is read\n")

# configure(name output_var result_var [PYTHONPATH path] [options...])
function(configure name out result)
  cmake_parse_arguments(C "" "PYTHONPATH" "" ${ARGN})
  set(environment)
  if(C_PYTHONPATH)
    set(environment ${CMAKE_COMMAND} -E env PYTHONPATH=${C_PYTHONPATH})
  endif()
  execute_process(COMMAND ${environment} ${CMAKE_COMMAND} -S ${SOURCE_DIR} -B ${SCRATCH}/${name}
                          -DBITEXACT_BUILD_TOOLS=OFF -DBITEXACT_BUILD_TESTS=OFF -DBITEXACT_BUILD_BENCHMARKS=OFF
                          -DBITEXACT_BUILD_CUDA=OFF -DPython3_EXECUTABLE=${PYTHON} -Dpybind11_DIR=${PYBIND11_DIR}
                          ${C_UNPARSED_ARGUMENTS}
                  OUTPUT_VARIABLE stdout ERROR_VARIABLE stderr RESULT_VARIABLE status)
  set(${out} "${stdout}${stderr}" PARENT_SCOPE)
  set(${result} ${status} PARENT_SCOPE)
endfunction()

# check(output pattern what): the output has a line matching pattern.
function(check output pattern what)
  if(NOT output MATCHES "${pattern}")
    message(FATAL_ERROR "configure should have said ${what}; its output:\n${output}")
  endif()
endfunction()

string(REGEX REPLACE "([][()+*.?^$|\\\\])" "\\\\\\1" python_pattern "${PYTHON}")

configure(own output status)
check("${output}" "\n-- Python module: for ${python_pattern} \\(NumPy [0-9][^\n]*; after the build: PYTHONPATH=[^ \n]*/own/python ${python_pattern}\n"
      "which interpreter the module is for and how to use it")

configure(numpy2_default output status PYTHONPATH ${SCRATCH}/numpy2)
if(PYBIND11_VERSION VERSION_LESS 2.12)
  set(refusal "${python_pattern} has NumPy 2\\.0\\.0, whose arrays pybind11 [0-9.]+ cannot read \\(2\\.12 or later can\\): configure with -DPython3_EXECUTABLE=/usr/bin/python3 \\(Debian's NumPy 1\\), or pip install 'pybind11>=2\\.12' into that interpreter and add -Dpybind11_DIR=[^\n]*--cmakedir\\)")
  check("${output}" "\n-- Python module: not built: ${refusal}\n" "in one line why the module is left out")
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "configure failed where it should leave the module out:\n${output}")
  endif()
  configure(numpy2_on output status PYTHONPATH ${SCRATCH}/numpy2 -DBITEXACT_BUILD_PYTHON=ON)
  if(status EQUAL 0)
    message(FATAL_ERROR "configure with -DBITEXACT_BUILD_PYTHON=ON accepted NumPy 2 with pybind11 ${PYBIND11_VERSION}:\n${output}")
  endif()
  check("${output}" "\n   bitexact's Python module: ${refusal} \\(-DBITEXACT_BUILD_PYTHON=OFF skips the module\\)\n"
        "in one line why the module cannot be built")
else()
  check("${output}" "\n-- Python module: for ${python_pattern} \\(NumPy 2\\.0\\.0, pybind11 "
        "that pybind11 ${PYBIND11_VERSION} reads NumPy 2")
endif()
file(REMOVE_RECURSE ${SCRATCH})
