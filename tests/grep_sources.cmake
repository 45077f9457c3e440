# grep_sources(PATTERN SOURCES LEAST PROBLEM): each line of SOURCES (absolute
# paths) that matches PATTERN is a problem; with any, stop with PROBLEM and the
# lines (file: line). Fewer than LEAST sources is a problem too: a check that
# reads no file would pass. Included by private_names.cmake and sm_counts.cmake.
function(grep_sources pattern sources least problem)
  set(problems "")
  foreach(source IN LISTS sources)
    file(STRINGS ${source} lines REGEX "${pattern}")
    file(RELATIVE_PATH name ${SOURCE_DIR} ${source})
    foreach(line IN LISTS lines)
      string(STRIP "${line}" line)
      string(APPEND problems "  ${name}: ${line}\n")
    endforeach()
  endforeach()
  list(LENGTH sources count)
  if(count LESS least)
    message(FATAL_ERROR "only ${count} sources found under ${SOURCE_DIR}; expected at least ${least}")
  endif()
  if(problems)
    message(FATAL_ERROR "${problem}:\n${problems}")
  endif()
  set(checked ${count} PARENT_SCOPE)
endfunction()
