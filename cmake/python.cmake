# Whether the Python module (python/) can be built here, for the default of
# BITEXACT_BUILD_PYTHON: Python 3 with its headers, pybind11, and NumPy and
# pytest importable by that interpreter (the module needs NumPy at run time,
# its tests pytest). Sets BITEXACT_PYTHON_DEFAULT and BITEXACT_PYTHON_MISSING
# on the first run; later runs keep the cached choice.
set(BITEXACT_PYTHON_DEFAULT OFF)
set(BITEXACT_PYTHON_MISSING "")
# The interpreter, when none is named: the first python3 on the PATH if it has NumPy and pytest,
# else Debian's /usr/bin/python3 if that one has them (a pyenv or conda python3 first on the PATH
# often has neither, and the README's packages install them for Debian's).
if(NOT DEFINED Python3_EXECUTABLE AND NOT SKBUILD AND PROJECT_IS_TOP_LEVEL AND NOT BITEXACT_SANITIZE)
  find_program(BITEXACT_PATH_PYTHON3 python3)
  foreach(candidate ${BITEXACT_PATH_PYTHON3} /usr/bin/python3)
    if(EXISTS "${candidate}")
      execute_process(COMMAND ${candidate} -c "import numpy, pytest" RESULT_VARIABLE status OUTPUT_QUIET ERROR_QUIET)
      if(status EQUAL 0)
        set(Python3_EXECUTABLE ${candidate} CACHE FILEPATH "The interpreter of the Python module (one with NumPy and pytest)")
        break()
      endif()
    endif()
  endforeach()
endif()
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
  if(BITEXACT_PYTHON_MISSING STREQUAL "")
    set(BITEXACT_PYTHON_DEFAULT ON)
  else()
    message(STATUS "Python module: not built (${Python3_EXECUTABLE} lacks:${BITEXACT_PYTHON_MISSING}). "
                   "Install with: sudo apt-get install -y ${BITEXACT_PYTHON_APT_PACKAGES}; "
                   "then reconfigure with -DBITEXACT_BUILD_PYTHON=ON "
                   "(another interpreter: -DPython3_EXECUTABLE=/usr/bin/python3)")
  endif()
endif()
