# Whether the Python module (python/) can be built here, for the default of
# BITEXACT_BUILD_PYTHON: Python 3 with its headers, pybind11, and NumPy and
# pytest importable by that interpreter (the module needs NumPy at run time,
# its tests pytest). Sets BITEXACT_PYTHON_DEFAULT and BITEXACT_PYTHON_MISSING
# on the first run; later runs keep the cached choice.
set(BITEXACT_PYTHON_DEFAULT OFF)
set(BITEXACT_PYTHON_MISSING "")
# The interpreter, when none is named: the first python3 on the PATH if it has NumPy and pytest,
# else Debian's /usr/bin/python3 if that one has them (a pyenv or conda python3 first on the PATH
# often has neither, and the README's packages install them for Debian's). One with NumPy 1 comes
# first: Debian 12's pybind11 (2.10) cannot read NumPy 2's arrays (see bitexact_python_numpy_problem).
if(NOT DEFINED Python3_EXECUTABLE AND NOT SKBUILD AND PROJECT_IS_TOP_LEVEL AND NOT BITEXACT_SANITIZE)
  find_program(BITEXACT_PATH_PYTHON3 python3)
  set(_chosen "")
  foreach(candidate ${BITEXACT_PATH_PYTHON3} /usr/bin/python3)
    if(EXISTS "${candidate}")
      execute_process(COMMAND ${candidate} -c "import numpy, pytest; print(numpy.__version__)" RESULT_VARIABLE status
                      OUTPUT_VARIABLE numpy_version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
      if(status EQUAL 0 AND (_chosen STREQUAL "" OR numpy_version VERSION_LESS 2))
        set(_chosen ${candidate})
      endif()
      if(status EQUAL 0 AND numpy_version VERSION_LESS 2)
        break()
      endif()
    endif()
  endforeach()
  if(NOT _chosen STREQUAL "")
    set(Python3_EXECUTABLE ${_chosen} CACHE FILEPATH "The interpreter of the Python module (one with NumPy and pytest)")
  endif()
endif()

# bitexact_python_numpy_problem(out): one line saying why the module cannot work with the NumPy of
# ${Python3_EXECUTABLE} and the pybind11 found (pybind11_VERSION), and what to do; empty when it can.
# pybind11 before 2.12 reads NumPy's array descriptors in NumPy 1's layout: under NumPy 2 every call
# would fail with "expected a flat contiguous array". Call it after find_package(pybind11).
function(bitexact_python_numpy_problem out)
  set(problem "")
  execute_process(COMMAND ${Python3_EXECUTABLE} -c "import numpy; print(numpy.__version__)" RESULT_VARIABLE status
                  OUTPUT_VARIABLE numpy_version OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(status EQUAL 0 AND NOT numpy_version VERSION_LESS 2 AND pybind11_VERSION VERSION_LESS 2.12)
    string(CONCAT problem "${Python3_EXECUTABLE} has NumPy ${numpy_version}, whose arrays pybind11 "
                  "${pybind11_VERSION} cannot read (2.12 or later can): configure with "
                  "-DPython3_EXECUTABLE=/usr/bin/python3 (Debian's NumPy 1), or pip install 'pybind11>=2.12' into "
                  "that interpreter and add -Dpybind11_DIR=$(${Python3_EXECUTABLE} -m pybind11 --cmakedir)")
  endif()
  set(${out} "${problem}" PARENT_SCOPE)
endfunction()
if(DEFINED BITEXACT_BUILD_PYTHON)
  # Chosen already (by the caller, or cached by an earlier run): python/ checks its own needs when on.
elseif(BITEXACT_SANITIZE)
  # An ASan-instrumented extension loads only into a process whose first
  # library is ASan's runtime; Debian's python3 is not built that way, so
  # the sanitizer build leaves the module out (the Release build tests it).
  message(STATUS "Python module: not built under BITEXACT_SANITIZE (an ASan extension cannot load into python3)")
elseif(PROJECT_IS_TOP_LEVEL)
  find_package(Python3 3.9 QUIET COMPONENTS Interpreter Development.Module)
  if(NOT Python3_Interpreter_FOUND OR NOT Python3_Development.Module_FOUND)
    string(APPEND BITEXACT_PYTHON_MISSING " python3-dev")
  else()
    foreach(module_and_package numpy:python3-numpy pytest:python3-pytest)
      string(REPLACE ":" ";" pair ${module_and_package})
      list(GET pair 0 module)
      list(GET pair 1 package)
      execute_process(COMMAND ${Python3_EXECUTABLE} -c "import ${module}" RESULT_VARIABLE status
                      OUTPUT_QUIET ERROR_QUIET)
      if(NOT status EQUAL 0)
        string(APPEND BITEXACT_PYTHON_MISSING " ${package}")
      endif()
    endforeach()
  endif()
  find_package(pybind11 2.6 QUIET CONFIG)
  if(NOT pybind11_FOUND)
    string(APPEND BITEXACT_PYTHON_MISSING " pybind11-dev")
  endif()
  set(numpy_problem "")
  if(BITEXACT_PYTHON_MISSING STREQUAL "")
    bitexact_python_numpy_problem(numpy_problem)
  endif()
  if(NOT numpy_problem STREQUAL "")
    message(STATUS "Python module: not built: ${numpy_problem}")
  elseif(BITEXACT_PYTHON_MISSING STREQUAL "")
    set(BITEXACT_PYTHON_DEFAULT ON)
  else()
    message(STATUS "Python module: not built (${Python3_EXECUTABLE} lacks:${BITEXACT_PYTHON_MISSING}). "
                   "Install with: sudo apt-get install -y ${BITEXACT_PYTHON_APT_PACKAGES}; "
                   "then reconfigure with -DBITEXACT_BUILD_PYTHON=ON "
                   "(another interpreter: -DPython3_EXECUTABLE=/usr/bin/python3)")
  endif()
endif()
