# The consumer in examples/ built against an installed copy and against the source tree. The install goes to a
# prefix other than the one configured (CMAKE_INSTALL_PREFIX), and the consumer runs without $BITEXACT_DATA_DIR,
# so its ex2 call finds the MUFU tables only if the package locates them relative to itself.
set(_consumer_work ${CMAKE_BINARY_DIR}/package-test)
add_test(NAME package_install
  COMMAND ${CMAKE_COMMAND} --install ${CMAKE_BINARY_DIR} --prefix ${_consumer_work}/prefix)
add_test(NAME package_find_package
  COMMAND ${CMAKE_COMMAND} -E env CMAKE_PREFIX_PATH=${_consumer_work}/prefix
          ${CMAKE_CTEST_COMMAND} --build-and-test ${PROJECT_SOURCE_DIR}/examples/consumer
          ${_consumer_work}/find_package --build-generator ${CMAKE_GENERATOR}
          --build-options -DBITEXACT_CONSUME=find_package -DCMAKE_PREFIX_PATH=${_consumer_work}/prefix
          --test-command consumer)
add_test(NAME package_add_subdirectory
  COMMAND ${CMAKE_CTEST_COMMAND} --build-and-test ${PROJECT_SOURCE_DIR}/examples/consumer
          ${_consumer_work}/add_subdirectory --build-generator ${CMAKE_GENERATOR}
          --build-options -DBITEXACT_CONSUME=add_subdirectory --test-command consumer)
set_tests_properties(package_install PROPERTIES FIXTURES_SETUP bitexact_installed)
set_tests_properties(package_find_package PROPERTIES FIXTURES_REQUIRED bitexact_installed)
set_tests_properties(package_find_package package_add_subdirectory PROPERTIES
  ENVIRONMENT_MODIFICATION BITEXACT_DATA_DIR=unset:)

# Every public header, and the consumer, under -Wall -Wextra -Wconversion -Wpedantic -Werror with g++ and
# clang++: users build with such flags, and the headers must not break their builds.
find_program(BITEXACT_GXX NAMES g++)
find_program(BITEXACT_CLANGXX NAMES clang++ clang++-16 clang++-15 clang++-14)
foreach(compiler_and_package "GXX;gxx;g++" "CLANGXX;clangxx;clang")
  list(GET compiler_and_package 0 compiler)
  list(GET compiler_and_package 1 name)
  list(GET compiler_and_package 2 package)
  set(test package_strict_warnings_${name})
  if(BITEXACT_${compiler})
    add_test(NAME ${test}
      COMMAND ${CMAKE_CTEST_COMMAND} --build-and-test ${PROJECT_SOURCE_DIR}/examples/consumer
              ${_consumer_work}/strict_${name} --build-generator ${CMAKE_GENERATOR}
              --build-options -DBITEXACT_CONSUME=add_subdirectory -DBITEXACT_STRICT_WARNINGS=ON
                              -DCMAKE_CXX_COMPILER=${BITEXACT_${compiler}}
              --test-command consumer)
    set_tests_properties(${test} PROPERTIES ENVIRONMENT_MODIFICATION BITEXACT_DATA_DIR=unset:)
  else()
    add_test(NAME ${test} COMMAND sh -c "echo 'SKIPPED: no ${package} compiler found, so the headers are not \
checked under it. Install it with: sudo apt-get install -y ${package}'; exit 77")
    set_tests_properties(${test} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endforeach()

# README.md's build without CMake, the second way to {fmt}'s code: -DFMT_HEADER_ONLY and no -lfmt, for a program
# that renders a trace (fmt's formatting compiled in; without either, the link fails on fmt::vformat).
add_test(NAME package_fmt_header_only
  COMMAND sh -c "\"$0\" -std=c++20 -I \"$1\" -DFMT_HEADER_ONLY \"$2\" -o \"$3\" && \"$3\""
          ${CMAKE_CXX_COMPILER} ${PROJECT_SOURCE_DIR}/include ${CMAKE_CURRENT_SOURCE_DIR}/fmt_header_only.cpp
          ${CMAKE_CURRENT_BINARY_DIR}/fmt_header_only)
