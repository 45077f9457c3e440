# The teaching page in headless Chromium against the bitexact command (ctest
# label web), included by web/CMakeLists.txt once the page is a target. The
# tests skip (exit 77, with the packages to install) when Chromium,
# chromedriver or selenium is missing. The interpreter is the one that has
# selenium: Debian's python3-selenium installs it for /usr/bin/python3.
find_program(BITEXACT_WEB_TEST_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH
             DOC "the Python of the browser tests (Debian's, where python3-selenium installs)")
if(NOT BITEXACT_WEB_TEST_PYTHON)
  find_program(BITEXACT_WEB_TEST_PYTHON python3)
endif()
# The command the page is compared with; by default the one this build makes.
set(BITEXACT_WEB_TEST_COMMAND "" CACHE FILEPATH "the bitexact command the browser tests compare with (default: this build's)")
if(BITEXACT_WEB_TEST_COMMAND)
  set(command ${BITEXACT_WEB_TEST_COMMAND})
elseif(TARGET bitexact_cli)
  set(command $<TARGET_FILE:bitexact_cli>)
else()
  message(STATUS "Teaching page: no browser tests (they compare with the bitexact command: BITEXACT_BUILD_TOOLS is off)")
  return()
endif()
set(driver ${PROJECT_SOURCE_DIR}/tests/web/test_page.py)
add_test(NAME web_page_matches_command
         COMMAND ${BITEXACT_WEB_TEST_PYTHON} ${driver} --page ${page_dir} --bitexact ${command})
add_test(NAME web_page_wrong_bit_is_caught
         COMMAND ${BITEXACT_WEB_TEST_PYTHON} ${driver} --page ${page_dir} --bitexact ${command} --corrupt-guard-bit)
set_tests_properties(web_page_matches_command web_page_wrong_bit_is_caught
                     PROPERTIES LABELS web SKIP_RETURN_CODE 77 TIMEOUT 600 RESOURCE_LOCK chromium)

# Screenshots of the three views for docs/web.md (docs/web/*.png), taken on demand.
add_custom_target(web_screenshots
  COMMAND ${BITEXACT_WEB_TEST_PYTHON} ${driver} --page ${page_dir} --screenshots ${PROJECT_SOURCE_DIR}/docs/web
  DEPENDS bitexact_web
  COMMENT "docs/web/*.png: the teaching page's views in headless Chromium"
  VERBATIM)
