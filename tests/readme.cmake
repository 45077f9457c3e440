# README.md's C++ example, compiled and run as pasted: the ```cpp block is
# copied into the build tree at configure time (a change to README.md
# reconfigures), built against the library, and its output must equal the
# block's `// prints:` comment. The Python example has its twin in
# python/tests/test_readme.py.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md)
file(READ ${PROJECT_SOURCE_DIR}/README.md readme)
string(REGEX MATCH "\n```cpp\n([^`]*)```" block "${readme}")
set(example "${CMAKE_MATCH_1}")
string(REGEX MATCH "// prints: ([^\n]*)" printed "${example}")
set(printed "${CMAKE_MATCH_1}")
if(example STREQUAL "" OR printed STREQUAL "")
  message(FATAL_ERROR "README.md: no ```cpp block with a `// prints:` comment (tests/readme.cmake checks it)")
endif()
file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/readme_example.cpp CONTENT "${example}" @ONLY)
add_executable(readme_example ${CMAKE_CURRENT_BINARY_DIR}/readme_example.cpp)
target_link_libraries(readme_example PRIVATE bitexact::bitexact)
target_compile_options(readme_example PRIVATE -Wall -Wextra -Werror)
string(REGEX REPLACE "([][()+*.?^$|\\\\])" "\\\\\\1" printed_pattern "${printed}")
add_test(NAME readme_cpp_example COMMAND readme_example)
set_tests_properties(readme_cpp_example PROPERTIES PASS_REGULAR_EXPRESSION "^${printed_pattern}\n$")
