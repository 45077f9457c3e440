# A GPU's SM count is written in one place, the GPU records of
# include/bitexact/hardware/gpu.hpp: the library, the command and the binding
# read it from there (--gpu, gpu=). Run as
#   cmake -DSOURCE_DIR=... -P sm_counts.cmake
# (the test `sm_counts`, registered in layering.cmake): every SM count of the
# records, as a number on its own, is refused anywhere else in include/, src/
# and python/ (not after a minus sign: mma.hpp's exponent -132 is no SM count).
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "sm_counts.cmake: -DSOURCE_DIR=... is required")
endif()

set(records ${SOURCE_DIR}/include/bitexact/hardware/gpu.hpp)
# A record is {"name", "summary", &architectures[i], sm_count}.
file(STRINGS ${records} rows REGEX "&architectures\\[[0-9]+\\], [0-9]+}")
set(counts "")
foreach(row IN LISTS rows)
  string(REGEX MATCH "&architectures\\[[0-9]+\\], ([0-9]+)}" ignored "${row}")
  list(APPEND counts ${CMAKE_MATCH_1})
endforeach()
list(REMOVE_DUPLICATES counts)
list(LENGTH counts count_of_counts)
if(count_of_counts LESS 2)
  message(FATAL_ERROR "sm_counts.cmake: found ${count_of_counts} SM counts in ${records}; expected the H100 SXM's and PCIe's")
endif()
list(JOIN counts "|" alternatives)
set(pattern "(^|[^-0-9A-Za-z_.])(${alternatives})([^0-9A-Za-z_]|$)")

file(GLOB_RECURSE sources ${SOURCE_DIR}/include/bitexact/*.hpp ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/src/*.hpp
                          ${SOURCE_DIR}/python/src/*.cpp ${SOURCE_DIR}/python/src/*.hpp ${SOURCE_DIR}/python/bitexact/*.py)
list(REMOVE_ITEM sources ${records})
include(${CMAKE_CURRENT_LIST_DIR}/grep_sources.cmake)
grep_sources("${pattern}" "${sources}" 50
             "an SM count (${alternatives}) is written outside the GPU records of hardware/gpu.hpp; read it from a gpu record instead")
message(STATUS "${checked} sources checked: the SM counts ${alternatives} are written only in hardware/gpu.hpp")
