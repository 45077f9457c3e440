# The command (src/) and the Python binding (python/src/) use the library as a user would: through its public
# names, never a name in one of its private namespaces (bitexact::detail, render_detail, check_detail, ... :
# every namespace of include/bitexact whose name ends in "detail"). Run as
#   cmake -DSOURCE_DIR=... -P private_names.cmake
# (the test `private_names`, registered in layering.cmake). A namespace of the command's own that ends in
# "detail" takes a prefix (svg_plot.hpp's plot_detail), so that it is not one of the library's names.
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED SOURCE_DIR)
  message(FATAL_ERROR "private_names.cmake: -DSOURCE_DIR=... is required")
endif()

file(GLOB_RECURSE headers ${SOURCE_DIR}/include/bitexact/*.hpp)
set(private "")
foreach(header IN LISTS headers)
  file(STRINGS ${header} declarations REGEX "namespace [A-Za-z_:]*detail[ {]")
  foreach(declaration IN LISTS declarations)
    string(REGEX MATCH "namespace ([A-Za-z_:]*::)?([A-Za-z_]*detail)[ {]" ignored "${declaration}")
    list(APPEND private ${CMAKE_MATCH_2})
  endforeach()
endforeach()
list(REMOVE_DUPLICATES private)
if(NOT "detail" IN_LIST private)
  message(FATAL_ERROR "private_names.cmake: no namespace detail found under ${SOURCE_DIR}/include/bitexact")
endif()
list(JOIN private "|" alternatives)
# A name qualified by one of them (detail::x, bitexact::detail::x), or the namespace brought in by using.
set(pattern "(^|[^A-Za-z0-9_])(${alternatives})::|using namespace ([A-Za-z_:]*::)?(${alternatives})[ ;]")

file(GLOB_RECURSE sources ${SOURCE_DIR}/src/*.cpp ${SOURCE_DIR}/src/*.hpp ${SOURCE_DIR}/python/src/*.cpp
                          ${SOURCE_DIR}/python/src/*.hpp)
include(${CMAKE_CURRENT_LIST_DIR}/grep_sources.cmake)
grep_sources("${pattern}" "${sources}" 20
             "src/ and python/src/ use the library's private names (${alternatives}); use public ones, or give a namespace of their own another name")
message(STATUS "${checked} sources checked: none uses the library's private namespaces (${alternatives})")
