# The layers of include/bitexact, kept pointing one way.
#
# core/      formats, bits, decoding, the environment and the names of its
#            settings, format dispatch, platform policy, the
#            events operations report, the one rounding step, the exact operations
# host/      whole buffers in the host's vector lanes
# trace/     the trace record built from events, its renderers, parsing, names, fmt glue
# hardware/  models of GPU instructions: tensor cores, MUFU (and its table files), ALU/cvt
# attention/ attention kernels composed from the layers below
# matmul/    matrix-product (GEMM) kernels composed from the layers below attention
# testing/   the kernel author's check and its doctest glue
#
# A header may include headers of its own layer and of the layers listed for
# it below, never one above; core and host include nothing but the standard
# library. bitexact/bitexact.hpp, the one include a user needs, sits on top.
#
# This file has two roles. Included from tests/CMakeLists.txt it registers the
# test `layering` and builds every header alone (a translation unit per
# header, target bitexact_headers_alone: a header that needs an include it does
# not make fails the build). Run as `cmake -DINCLUDE_DIR=... -P layering.cmake`
# it checks the include directives of every header against the layers.

set(allowed_core "core")
set(allowed_host "core;host")
set(allowed_trace "core;trace")
set(allowed_hardware "core;host;trace;hardware")
set(allowed_attention "core;host;trace;hardware;attention")
set(allowed_matmul "core;host;trace;hardware;matmul")
set(allowed_testing "core;host;trace;hardware;attention;matmul;testing")
set(standard_library_only "core;host")

if(CMAKE_SCRIPT_MODE_FILE)
  get_filename_component(INCLUDE_DIR "${INCLUDE_DIR}" ABSOLUTE)
  file(GLOB_RECURSE headers RELATIVE ${INCLUDE_DIR}/bitexact ${INCLUDE_DIR}/bitexact/*.hpp)
  set(problems "")
  set(checked 0)
  foreach(header IN LISTS headers)
    if(header STREQUAL "bitexact.hpp")
      continue()
    endif()
    string(REGEX MATCH "^[^/]+" layer "${header}")
    if(NOT DEFINED allowed_${layer} OR header STREQUAL layer)
      string(APPEND problems "  ${header}: not in a layer folder (core, host, trace, hardware, attention, matmul, testing)\n")
      continue()
    endif()
    math(EXPR checked "${checked} + 1")
    file(STRINGS ${INCLUDE_DIR}/bitexact/${header} directives REGEX "^[ \t]*#[ \t]*include")
    foreach(directive IN LISTS directives)
      if(directive MATCHES "#[ \t]*include[ \t]*\"([^\"]+)\"")
        set(path "${CMAKE_MATCH_1}")
        if(path MATCHES "^\\.\\./([^/]+)/")
          set(target "${CMAKE_MATCH_1}")
        elseif(path MATCHES "^[^/]+$")
          set(target "${layer}")
        else()
          string(APPEND problems "  ${header}: '${path}' is neither in its own folder nor ../LAYER/\n")
          continue()
        endif()
        list(FIND allowed_${layer} "${target}" at)
        if(at EQUAL -1)
          string(APPEND problems "  ${header}: includes ${path}, from the layer ${target} above ${layer}\n")
        endif()
      elseif(directive MATCHES "#[ \t]*include[ \t]*<([^>]+)>")
        set(path "${CMAKE_MATCH_1}")
        list(FIND standard_library_only "${layer}" restricted)
        if(path MATCHES "^bitexact/")
          string(APPEND problems "  ${header}: includes <${path}>; inside the library, include relative paths\n")
        elseif(NOT restricted EQUAL -1 AND path MATCHES "/")
          string(APPEND problems "  ${header}: includes <${path}>, but ${layer}/ uses the standard library only\n")
        endif()
      endif()
    endforeach()
  endforeach()
  if(checked LESS 20)
    string(APPEND problems "  only ${checked} headers found under ${INCLUDE_DIR}/bitexact: wrong folder?\n")
  endif()
  if(problems)
    message(FATAL_ERROR "include/bitexact breaks its layering:\n${problems}")
  endif()
  message(STATUS "${checked} headers checked: every include points to its own layer or one below")
  return()
endif()

add_test(NAME layering
  COMMAND ${CMAKE_COMMAND} -DINCLUDE_DIR=${PROJECT_SOURCE_DIR}/include -P ${CMAKE_CURRENT_LIST_FILE})
# Above the library, the command and the Python binding use only its public names.
add_test(NAME private_names
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_LIST_DIR}/private_names.cmake)
# A GPU's SM count lives in its record (hardware/gpu.hpp) alone.
add_test(NAME sm_counts
  COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -P ${CMAKE_CURRENT_LIST_DIR}/sm_counts.cmake)

# Every header compiled alone, each in its own translation unit (twice, so a
# missing #pragma once shows too). doctest.hpp needs doctest, which the tests have.
file(GLOB_RECURSE _bitexact_headers RELATIVE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/include/bitexact/*.hpp)
set(_alone_sources "")
foreach(header IN LISTS _bitexact_headers)
  string(MAKE_C_IDENTIFIER "${header}" name)
  set(source ${CMAKE_CURRENT_BINARY_DIR}/headers_alone/${name}.cpp)
  file(CONFIGURE OUTPUT ${source} CONTENT "#include <${header}>\n#include <${header}>\n")
  list(APPEND _alone_sources ${source})
endforeach()
add_library(bitexact_headers_alone OBJECT ${_alone_sources})
target_link_libraries(bitexact_headers_alone PRIVATE bitexact::bitexact doctest::doctest)
target_compile_options(bitexact_headers_alone PRIVATE -Wall -Wextra)
