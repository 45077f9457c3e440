# The teaching page (web/): the library compiled to WebAssembly by Debian's
# emscripten, and a static page around it. On by default at top level when
# em++ is found, so that a machine without emscripten builds what it built
# before; -DBITEXACT_BUILD_WEB=ON insists, and stops with the package to
# install. The browser tests (tests/web/) need chromium, chromium-driver and
# python3-selenium besides; without them they are skipped and say why.
set(BITEXACT_WEB_APT_PACKAGES "emscripten chromium chromium-driver python3-selenium")
find_program(BITEXACT_EMXX em++ DOC "emscripten's C++ compiler (Debian package emscripten)")
if(NOT DEFINED BITEXACT_BUILD_WEB)
  set(_bitexact_web_default OFF)
  if(BITEXACT_EMXX AND PROJECT_IS_TOP_LEVEL AND NOT BITEXACT_SANITIZE AND NOT SKBUILD)
    set(_bitexact_web_default ON)
  elseif(PROJECT_IS_TOP_LEVEL AND NOT BITEXACT_EMXX)
    message(STATUS "Teaching page (web/): not built (no em++). Install with: sudo apt-get install -y ${BITEXACT_WEB_APT_PACKAGES}")
  endif()
endif()
option(BITEXACT_BUILD_WEB "Build the teaching page (web/) with emscripten, and its browser tests" ${_bitexact_web_default})
if(BITEXACT_BUILD_WEB)
  if(NOT BITEXACT_EMXX)
    message(FATAL_ERROR "The teaching page (BITEXACT_BUILD_WEB) needs emscripten's em++. Install it with:\n"
                        "  sudo apt-get install -y emscripten\n"
                        "(the page and its browser tests: sudo apt-get install -y ${BITEXACT_WEB_APT_PACKAGES})")
  endif()
  add_subdirectory(${CMAKE_CURRENT_LIST_DIR}/../web ${CMAKE_BINARY_DIR}/web)
elseif(BITEXACT_BUILD_TESTS AND NOT BITEXACT_EMXX)
  # Listed as skipped, with the reason, rather than silently absent.
  add_test(NAME web_page_matches_command
           COMMAND sh -c "echo 'skipped: no em++, so no teaching page to test; install with: sudo apt-get install -y ${BITEXACT_WEB_APT_PACKAGES}'; exit 77")
  set_tests_properties(web_page_matches_command PROPERTIES LABELS web SKIP_RETURN_CODE 77)
endif()
