# Doc pages whose command outputs are checked (ctest label docs, prefix docs_).
#
# In a page, a marker comment directly before a fenced block names the
# command whose output the block shows:
#
#   <!-- output of: bitexact trace add fp32:0xC01A0E2E fp32:0xC0130000 --to bf16 -->
#   ```
#   $ bitexact trace add fp32:0xC01A0E2E fp32:0xC0130000 --to bf16
#   ...its stdout...
#   ```
#
# optionally followed by clauses after " ; ": `lines 1-12,40-52,60` (only those
# lines of stdout, "..." where lines are cut) and `exit N` (the expected exit
# status, 0 unless given). The block is "$ " and the command, then the
# output. The command is a line of POSIX shell, run by `sh -c` as a reader's
# shell would run it (quotes, `printf '...\n' | bitexact eval bf16_add`), with
# the programs this test knows first on the PATH; each command of a pipeline
# must be one of them or a program found on the PATH, and one must be ours.
# Commands run in a scratch folder holding a copy of docs/ and links
# to tests/, data/ and examples/, so paths read as from the repository root; a file a
# command writes under docs/ (a figure) must equal the checked-in one. A
# fenced block with no language is taken for output and must have a marker.
#
# This file has two roles. Included from tests/CMakeLists.txt it registers a
# test per page; run as
#   cmake -DPAGE=docs/x.md -DSOURCE_DIR=. -DSCRATCH=dir "-DPROGRAMS=bitexact=path|name=path..." [-DUPDATE=ON] -P docs.cmake
# it checks the page (or, with UPDATE=ON, rewrites its blocks and figures).

if(CMAKE_SCRIPT_MODE_FILE)
  cmake_minimum_required(VERSION 3.25)  # lists keep empty elements (CMP0007): a blank line is a line
  # Page text is handled as a CMake list of lines: ';', '[' and ']' would be
  # read as list syntax, so they travel as control characters.
  string(ASCII 1 semicolon_code)
  string(ASCII 2 open_code)
  string(ASCII 3 close_code)
  function(encode text out)
    string(REPLACE ";" "${semicolon_code}" text "${text}")
    string(REPLACE "[" "${open_code}" text "${text}")
    string(REPLACE "]" "${close_code}" text "${text}")
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()
  function(decode text out)
    string(REPLACE "${semicolon_code}" ";" text "${text}")
    string(REPLACE "${open_code}" "[" text "${text}")
    string(REPLACE "${close_code}" "]" text "${text}")
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()
  # The lines of text (encoded), without the newline after the last one.
  function(lines_of text out)
    encode("${text}" text)
    string(REGEX REPLACE "\n$" "" text "${text}")
    string(REPLACE "\n" ";" text "${text}")
    set(${out} "${text}" PARENT_SCOPE)
  endfunction()

  foreach(required PAGE SOURCE_DIR SCRATCH PROGRAMS)
    if(NOT DEFINED ${required})
      message(FATAL_ERROR "docs.cmake: -D${required}=... is required")
    endif()
  endforeach()
  string(REPLACE "|" ";" PROGRAMS "${PROGRAMS}")
  get_filename_component(page_path "${PAGE}" ABSOLUTE BASE_DIR "${SOURCE_DIR}")
  file(RELATIVE_PATH page_name "${SOURCE_DIR}" "${page_path}")

  file(REMOVE_RECURSE "${SCRATCH}")
  file(MAKE_DIRECTORY "${SCRATCH}")
  file(COPY "${SOURCE_DIR}/docs" DESTINATION "${SCRATCH}")
  foreach(linked tests data examples)
    file(CREATE_LINK "${SOURCE_DIR}/${linked}" "${SCRATCH}/${linked}" SYMBOLIC)
  endforeach()

  # The programs the page names, as links in a folder put first on the PATH of its commands.
  set(programs_dir "${SCRATCH}/.programs")
  file(MAKE_DIRECTORY "${programs_dir}")
  set(known_programs)
  foreach(entry IN LISTS PROGRAMS)
    if(NOT entry MATCHES "^([^=]+)=(.+)$")
      message(FATAL_ERROR "docs.cmake: PROGRAMS entry '${entry}' is not name=path")
    endif()
    file(CREATE_LINK "${CMAKE_MATCH_2}" "${programs_dir}/${CMAKE_MATCH_1}" SYMBOLIC)
    list(APPEND known_programs "${CMAKE_MATCH_1}")
  endforeach()
  set(ENV{PATH} "${programs_dir}:$ENV{PATH}")

  file(READ "${page_path}" page_text)
  lines_of("${page_text}" lines)
  list(LENGTH lines line_count)
  set(rewritten)
  set(failures "")
  set(blocks 0)
  set(unmarked "")
  set(in_other_block 0)  # inside a fenced block without a marker (code, a shell command to type)
  set(i 0)
  while(i LESS line_count)
    list(GET lines ${i} line)
    list(APPEND rewritten "${line}")
    math(EXPR i "${i} + 1")
    if(line MATCHES "^```")
      # A block with no language is output: unless its marker says whose, nothing would check it.
      if(NOT in_other_block AND line STREQUAL "```")
        string(APPEND unmarked "${page_name}:${i}: a fenced block with no language and no '<!-- output of: ... -->' "
                               "marker before it: output nobody checks (add the marker, or a language such as "
                               "```text for what is not a command's output)\n")
      endif()
      math(EXPR in_other_block "1 - ${in_other_block}")
      continue()
    endif()
    if(in_other_block OR NOT line MATCHES "^<!-- output of: (.*) -->$")
      continue()
    endif()
    decode("${CMAKE_MATCH_1}" spec)
    math(EXPR marker_line "${i}")
    # The command and its clauses.
    string(REPLACE " ; " ";" clauses "${spec}")
    list(POP_FRONT clauses command)
    set(expected_status 0)
    set(ranges "")
    foreach(clause IN LISTS clauses)
      if(clause MATCHES "^exit ([0-9]+)$")
        set(expected_status ${CMAKE_MATCH_1})
      elseif(clause MATCHES "^lines ([0-9,-]+)$")
        string(REPLACE "," ";" ranges "${CMAKE_MATCH_1}")
      else()
        message(FATAL_ERROR "${page_name}:${marker_line}: unknown clause '${clause}' (expected 'lines A-B,C-D' or 'exit N')")
      endif()
    endforeach()
    # Each command of the pipeline (split at " | ") names a known program or one on the PATH; one is ours.
    string(REPLACE " | " ";" stages "${command}")
    set(ours 0)
    foreach(stage IN LISTS stages)
      separate_arguments(words UNIX_COMMAND "${stage}")
      list(GET words 0 program)
      if(program IN_LIST known_programs)
        set(ours 1)
      else()
        find_program(found_${program} "${program}" NO_CACHE)
        if(NOT found_${program})
          message(FATAL_ERROR "${page_name}:${marker_line}: '${program}' is neither a program this test knows "
                              "(${known_programs}) nor one on the PATH")
        endif()
      endif()
    endforeach()
    if(NOT ours)
      message(FATAL_ERROR "${page_name}:${marker_line}: `${command}` runs none of the programs this test checks "
                          "(${known_programs})")
    endif()
    # The fenced block after the marker.
    if(i GREATER_EQUAL line_count)
      message(FATAL_ERROR "${page_name}:${marker_line}: the marker must be followed by a fenced block")
    endif()
    list(GET lines ${i} fence)
    if(NOT fence MATCHES "^```")
      message(FATAL_ERROR "${page_name}:${marker_line}: the line after the marker must open a fenced block (```)")
    endif()
    list(APPEND rewritten "${fence}")
    math(EXPR i "${i} + 1")
    set(old_block)
    while(TRUE)
      if(i GREATER_EQUAL line_count)
        message(FATAL_ERROR "${page_name}:${marker_line}: the fenced block is not closed")
      endif()
      list(GET lines ${i} block_line)
      math(EXPR i "${i} + 1")
      if(block_line MATCHES "^```")
        break()
      endif()
      list(APPEND old_block "${block_line}")
    endwhile()

    execute_process(COMMAND sh -c "${command}" WORKING_DIRECTORY "${SCRATCH}"
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE status)
    if(NOT status STREQUAL expected_status)
      message(FATAL_ERROR "${page_name}:${marker_line}: `${command}` exited with ${status}, the page expects "
                          "${expected_status}\n--- stderr ---\n${err}")
    endif()
    lines_of("${out}" output_lines)
    list(LENGTH output_lines output_count)
    set(new_block "$ ${command}")
    encode("${new_block}" new_block)
    if(ranges STREQUAL "")
      foreach(kept IN LISTS output_lines)
        list(APPEND new_block "${kept}")
      endforeach()
    else()
      set(shown_until 0)
      foreach(range IN LISTS ranges)
        if(range MATCHES "^([0-9]+)$")
          set(range "${range}-${range}")
        endif()
        if(NOT range MATCHES "^([0-9]+)-([0-9]+)$" OR CMAKE_MATCH_1 LESS 1 OR CMAKE_MATCH_2 LESS CMAKE_MATCH_1
           OR CMAKE_MATCH_2 GREATER output_count OR CMAKE_MATCH_1 LESS_EQUAL shown_until)
          message(FATAL_ERROR "${page_name}:${marker_line}: lines '${range}': ranges must ascend within the "
                              "output's ${output_count} lines")
        endif()
        set(first ${CMAKE_MATCH_1})
        set(last ${CMAKE_MATCH_2})
        math(EXPR gap_start "${shown_until} + 1")
        if(first GREATER gap_start)
          list(APPEND new_block "...")
        endif()
        foreach(n RANGE ${first} ${last})
          math(EXPR index "${n} - 1")
          list(GET output_lines ${index} kept)
          list(APPEND new_block "${kept}")
        endforeach()
        set(shown_until ${last})
      endforeach()
      if(shown_until LESS output_count)
        list(APPEND new_block "...")
      endif()
    endif()
    foreach(kept IN LISTS new_block)
      list(APPEND rewritten "${kept}")
    endforeach()
    list(APPEND rewritten "${fence}")
    math(EXPR blocks "${blocks} + 1")

    if(NOT old_block STREQUAL new_block)
      # Where the two blocks part, with a few lines of each from there.
      list(LENGTH old_block old_count)
      list(LENGTH new_block new_count)
      set(at 0)
      while(at LESS old_count AND at LESS new_count)
        list(GET old_block ${at} a)
        list(GET new_block ${at} b)
        if(NOT a STREQUAL b)
          break()
        endif()
        math(EXPR at "${at} + 1")
      endwhile()
      set(diff "")
      foreach(side old new)
        set(sign "-")
        if(side STREQUAL "new")
          set(sign "+")
        endif()
        set(shown 0)
        set(k ${at})
        while(k LESS ${side}_count AND shown LESS 4)
          list(GET ${side}_block ${k} text)
          decode("${text}" text)
          string(APPEND diff "${sign} ${text}\n")
          math(EXPR k "${k} + 1")
          math(EXPR shown "${shown} + 1")
        endwhile()
      endforeach()
      math(EXPR block_line_number "${marker_line} + 2 + ${at}")
      string(APPEND failures "${page_name}:${block_line_number}: the block of `${command}` differs from its output "
                             "(- page, + command):\n${diff}\n")
    endif()
  endwhile()
  if(blocks EQUAL 0)
    message(FATAL_ERROR "${page_name}: no '<!-- output of: ... -->' block: nothing was checked")
  endif()
  if(NOT unmarked STREQUAL "")
    message(NOTICE "${unmarked}")
    message(FATAL_ERROR "${page_name}: output blocks without a marker (above)")
  endif()

  # Figures the commands wrote under docs/.
  file(GLOB_RECURSE written RELATIVE "${SCRATCH}/docs" "${SCRATCH}/docs/*")
  set(changed_figures)
  foreach(figure IN LISTS written)
    set(checked_in "${SOURCE_DIR}/docs/${figure}")
    set(same 1)
    if(EXISTS "${checked_in}")
      execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files "${SCRATCH}/docs/${figure}" "${checked_in}"
                      RESULT_VARIABLE same)
      math(EXPR same "1 - ${same}")
    else()
      set(same 0)
    endif()
    if(NOT same)
      list(APPEND changed_figures "${figure}")
    endif()
  endforeach()

  set(regenerate "`cmake --build build --target update_docs` (all pages) or update_docs_<page>")
  if(UPDATE)
    list(JOIN rewritten "\n" new_text)
    decode("${new_text}\n" new_text)
    if(NOT new_text STREQUAL page_text)
      file(WRITE "${page_path}" "${new_text}")
      message(STATUS "${page_name}: blocks rewritten")
    endif()
    foreach(figure IN LISTS changed_figures)
      file(COPY_FILE "${SCRATCH}/docs/${figure}" "${SOURCE_DIR}/docs/${figure}")
      message(STATUS "docs/${figure}: rewritten")
    endforeach()
    message(STATUS "${page_name}: ${blocks} blocks up to date")
    return()
  endif()
  foreach(figure IN LISTS changed_figures)
    string(APPEND failures "docs/${figure}: the page's commands write a different file than the one checked in\n")
  endforeach()
  if(NOT failures STREQUAL "")
    message(NOTICE "${failures}")  # as written: FATAL_ERROR's text would be reflowed
    message(FATAL_ERROR "${page_name} is out of date with the code. Regenerate with ${regenerate}")
  endif()
  message(STATUS "${page_name}: ${blocks} blocks agree with their commands")
  return()
endif()

if(NOT TARGET bitexact_cli)
  return()
endif()

set(BITEXACT_DOCS_DRIVER ${CMAKE_CURRENT_LIST_FILE})
add_custom_target(update_docs)

# bitexact_docs_test(page [PROGRAMS target ...]): the test docs_<page> checks
# the page's blocks with the bitexact command and the named programs (each
# named in the page by its target's output name); the target
# update_docs_<page> (and update_docs, every page) rewrites them.
function(bitexact_docs_test page)
  cmake_parse_arguments(T "" "" "PROGRAMS" ${ARGN})
  get_filename_component(name "${page}" NAME_WE)
  string(TOLOWER "${name}" name)
  string(REPLACE "-" "_" name "${name}")
  set(programs "bitexact=$<TARGET_FILE:bitexact_cli>")
  foreach(target IN LISTS T_PROGRAMS)
    string(APPEND programs "|$<TARGET_FILE_BASE_NAME:${target}>=$<TARGET_FILE:${target}>")
  endforeach()
  set(arguments -DPAGE=${page} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DSCRATCH=${CMAKE_CURRENT_BINARY_DIR}/docs/${name}
                "-DPROGRAMS=${programs}")
  add_test(NAME docs_${name} COMMAND ${CMAKE_COMMAND} ${arguments} -P ${BITEXACT_DOCS_DRIVER})
  set_tests_properties(docs_${name} PROPERTIES LABELS docs)
  add_custom_target(update_docs_${name} COMMAND ${CMAKE_COMMAND} ${arguments} -DUPDATE=ON -P ${BITEXACT_DOCS_DRIVER}
                    VERBATIM)
  add_dependencies(update_docs_${name} bitexact_cli ${T_PROGRAMS})
  add_dependencies(update_docs update_docs_${name})
endfunction()

if(TARGET fused_scale_kernel AND TARGET check_flash_head)
  bitexact_docs_test(docs/unit-testing-kernels.md PROGRAMS fused_scale_kernel check_flash_head)
endif()
bitexact_docs_test(README.md)
bitexact_docs_test(docs/how-the-gpu-adds.md)
bitexact_docs_test(docs/rounding-bias.md)
bitexact_docs_test(docs/why-kernels-disagree.md)
bitexact_docs_test(docs/matmul.md)
