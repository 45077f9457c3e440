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

