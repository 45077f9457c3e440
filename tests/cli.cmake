# Tests of the `bitexact` command, run on the built binary (ctest prefix cli_).
#
# This file has two roles. Included from tests/CMakeLists.txt it registers
# the tests; run as `cmake -P cli.cmake -DBINARY=... -DARGS=a|b|c ...` it is
# the driver of one test: it runs the binary and checks the exit status,
# stdout (exact file or contained strings) and that an error is one line.

if(CMAKE_SCRIPT_MODE_FILE)
  string(REPLACE "|" ";" arguments "${ARGS}")
  set(redirections)
  set(out "")
  if(DEFINED INPUT)
    list(APPEND redirections INPUT_FILE ${INPUT})
  endif()
  if(DEFINED OUTPUT_FILE)  # e.g. /dev/full, to see a failed write reported
    list(APPEND redirections OUTPUT_FILE ${OUTPUT_FILE})
  else()
    list(APPEND redirections OUTPUT_VARIABLE out)
  endif()
  execute_process(COMMAND ${BINARY} ${arguments} ${redirections} ERROR_VARIABLE err RESULT_VARIABLE rc)
  set(shown "bitexact ${arguments}\n--- stdout ---\n${out}\n--- stderr ---\n${err}")
  if(NOT rc STREQUAL RC)
    message(FATAL_ERROR "exit status ${rc}, expected ${RC}\n${shown}")
  endif()
  if(DEFINED EXPECT)
    file(READ ${EXPECT} expected)
    if(NOT out STREQUAL expected)
      message(FATAL_ERROR "stdout differs from ${EXPECT}:\n--- expected ---\n${expected}\n${shown}")
    endif()
  endif()
  if(DEFINED CONTAINS)
    string(REPLACE "@@" ";" needles "${CONTAINS}")
    foreach(needle IN LISTS needles)
      string(FIND "${out}" "${needle}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "stdout lacks '${needle}'\n${shown}")
      endif()
    endforeach()
  endif()
  if(DEFINED CONTAINS_WORDS)  # each a whole word of stdout: 'up' is not found in 'upward'
    string(REPLACE "@@" ";" needles "${CONTAINS_WORDS}")
    foreach(needle IN LISTS needles)
      if(NOT out MATCHES "(^|[^A-Za-z0-9_])${needle}([^A-Za-z0-9_]|$)")
        message(FATAL_ERROR "stdout lacks the word '${needle}'\n${shown}")
      endif()
    endforeach()
  endif()
  if(DEFINED ERROR_CONTAINS)
    string(REPLACE "@@" ";" needles "${ERROR_CONTAINS}")
    foreach(needle IN LISTS needles)
      string(FIND "${err}" "${needle}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "stderr lacks '${needle}'\n${shown}")
      endif()
    endforeach()
  endif()
  if(QUIET_STDERR AND NOT err STREQUAL "")  # piped, the command adds nothing (no progress line)
    message(FATAL_ERROR "stderr is not empty\n${shown}")
  endif()
  if(ONE_LINE_ERROR)
    if(NOT err MATCHES "^bitexact: error: [^\n]+\n$")
      message(FATAL_ERROR "stderr is not one 'bitexact: error:' line\n${shown}")
    endif()
    if(NOT out STREQUAL "")
      message(FATAL_ERROR "an error must not write to stdout\n${shown}")
    endif()
  endif()
  return()
endif()

if(NOT TARGET bitexact_cli)
  return()
endif()

set(BITEXACT_CLI_DRIVER ${CMAKE_CURRENT_LIST_FILE})
set(BITEXACT_CLI_DATA ${CMAKE_CURRENT_BINARY_DIR}/cli)

# bitexact_cli_test(name ARGS a b ... [RC n] [INPUT file] [OUTPUT_FILE file] [EXPECT file]
#                   [CONTAINS s ...] [CONTAINS_WORDS w ...] [ERROR_CONTAINS s ...] [ONE_LINE_ERROR] [QUIET_STDERR])
function(bitexact_cli_test name)
  cmake_parse_arguments(T "ONE_LINE_ERROR;QUIET_STDERR" "RC;INPUT;OUTPUT_FILE;EXPECT" "ARGS;CONTAINS;CONTAINS_WORDS;ERROR_CONTAINS"
                        ${ARGN})
  if(NOT DEFINED T_RC)
    set(T_RC 0)
  endif()
  list(JOIN T_ARGS "|" joined)
  set(definitions -DBINARY=$<TARGET_FILE:bitexact_cli> "-DARGS=${joined}" -DRC=${T_RC})
  if(T_INPUT)
    list(APPEND definitions -DINPUT=${T_INPUT})
  endif()
  if(T_OUTPUT_FILE)
    list(APPEND definitions -DOUTPUT_FILE=${T_OUTPUT_FILE})
  endif()
  if(T_EXPECT)
    list(APPEND definitions -DEXPECT=${T_EXPECT})
  endif()
  if(T_CONTAINS)
    list(JOIN T_CONTAINS "@@" contains)
    list(APPEND definitions "-DCONTAINS=${contains}")
  endif()
  if(T_CONTAINS_WORDS)
    list(JOIN T_CONTAINS_WORDS "@@" contains)
    list(APPEND definitions "-DCONTAINS_WORDS=${contains}")
  endif()
  if(T_ERROR_CONTAINS)
    list(JOIN T_ERROR_CONTAINS "@@" contains)
    list(APPEND definitions "-DERROR_CONTAINS=${contains}")
  endif()
  if(T_ONE_LINE_ERROR)
    list(APPEND definitions -DONE_LINE_ERROR=ON)
  endif()
  if(T_QUIET_STDERR)
    list(APPEND definitions -DQUIET_STDERR=ON)
  endif()
  add_test(NAME cli_${name} COMMAND ${CMAKE_COMMAND} ${definitions} -P ${BITEXACT_CLI_DRIVER})
endfunction()

# The command's sources that build strings in loops, compiled as the Release build compiles them but with
# -Werror: GCC 12 warned -Wrestrict on `names += (c ? "" : " ") + std::string(...)` in eval.cpp. (The whole
# command under -Werror would cost a second build of it, and fail a user's build on a new compiler's warning.)
add_test(NAME cli_sources_without_warnings
  COMMAND sh -c "for source in eval.cpp options.cpp; do \"$0\" -std=c++20 -O3 -DNDEBUG -Wall -Wextra -Werror -I \"$1\" \
-c \"$2/$source\" -o /dev/null || exit 1; done"
          ${CMAKE_CXX_COMPILER} ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)

# Operand parsing, as a library user calls it.
bitexact_add_test_program(test_cli_parse test_cli_parse.cpp)
add_test(NAME cli_parse COMMAND test_cli_parse)

# --- help and version --------------------------------------------------------
bitexact_cli_test(help ARGS --help CONTAINS "trace OP" "eval FUNCTION" "demo"
  "1 eval found bad input lines" "2 bad arguments, or output that\ncould not be written")
bitexact_cli_test(help_command ARGS help trace CONTAINS "usage: bitexact trace")
bitexact_cli_test(error_help_two_commands RC 2 ARGS help trace eval ONE_LINE_ERROR)
bitexact_cli_test(error_version_extra_argument RC 2 ARGS --version extra ONE_LINE_ERROR ERROR_CONTAINS "'extra'")
bitexact_cli_test(version ARGS --version CONTAINS "bitexact ${PROJECT_VERSION}")
bitexact_cli_test(trace_help ARGS trace --help CONTAINS "--round MODE" "--output STYLE" "bf16:0xC013"
  "tf32:0x1FC00           tf32 patterns are its 19 bits: this is 1.0" "tf32:fp32:0x3F800000")
bitexact_cli_test(eval_help ARGS eval --help CONTAINS "f16_mulAdd" "-rminMag" "--stop-on-error" "--check")
bitexact_cli_test(demo_help ARGS demo --help CONTAINS "Section 3.3.2")
# --help lists every spelling that --round, --tininess and --nan accept: the names read here from the one table
# of spellings (core/names.hpp), each a whole word of the help (trace and eval share the options).
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/include/bitexact/core/names.hpp)
file(READ ${PROJECT_SOURCE_DIR}/include/bitexact/core/names.hpp names_hpp)
set(every_spelling)
foreach(setting rounding tininess nan_policy)
  string(REGEX MATCH " ${setting}_spellings{{([^;]*)}};" table "${names_hpp}")
  string(REGEX MATCHALL "\"[A-Za-z_]+\"" names "${CMAKE_MATCH_1}")
  list(LENGTH names count)
  if(count LESS 2)
    message(FATAL_ERROR "tests/cli.cmake: no ${setting}_spellings table found in core/names.hpp")
  endif()
  string(REPLACE "\"" "" names "${names}")
  list(APPEND every_spelling ${names})
endforeach()
foreach(command trace eval)
  bitexact_cli_test(${command}_help_lists_every_spelling ARGS ${command} --help CONTAINS_WORDS ${every_spelling})
endforeach()
# The lists come from the command table and the option tables (src/main.cpp, each command's table).
bitexact_cli_test(help_lists_every_command ARGS --help CONTAINS "  attention Q K V" "  bias attribution"
  "  bias statistics")
bitexact_cli_test(help_lists_options_and_their_rule ARGS bias attribution --help CONTAINS "  --head-dim D  64 or 128"
  "Options take `--name VALUE` or `--name=VALUE`, each once.")
bitexact_cli_test(error_unknown_option_names_the_analysis RC 2 ARGS bias statistics --colour 3 ONE_LINE_ERROR
  ERROR_CONTAINS "bias statistics: unknown option '--colour'; see bitexact bias statistics --help")
bitexact_cli_test(error_option_of_two_values RC 2 ARGS attention q.npy k.npy v.npy --compare flex_attention_sm90
  ONE_LINE_ERROR ERROR_CONTAINS "--compare needs 2 values, A B")

# --- trace: the golden example -------------------------------------------------
bitexact_cli_test(trace_golden_fp32_sum ARGS trace add fp32:0xC01A0E2E fp32:0xC0130000
  CONTAINS "10.01011010000111000101110" "0xC0968717")
bitexact_cli_test(trace_golden_to_bf16 ARGS trace add fp32:0xC01A0E2E fp32:0xC0130000 --to bf16
  CONTAINS "0xC097" "-4.71875")
bitexact_cli_test(trace_golden_convert ARGS trace convert fp32:0xC0968717 --to bf16
  CONTAINS "0xC097" "-0.014759540557861328")
bitexact_cli_test(trace_decimal_operands ARGS trace add -2.40625 -2.296875 --from bf16
  CONTAINS "0xC096")
bitexact_cli_test(trace_hex_float ARGS trace mul 0x1.8p-3 bf16:2 --to bf16 CONTAINS "0x3EC0")
bitexact_cli_test(trace_mixed_accumulator ARGS trace add fp32:1 bf16:0x3C00 --to fp32 CONTAINS "0x3F810000")
bitexact_cli_test(trace_json ARGS trace add fp32:0xC01A0E2E fp32:0xC0130000 --to bf16 --output json
  CONTAINS "{" "C097")
bitexact_cli_test(trace_round_toward_zero ARGS trace convert fp32:0xC0968717 --to bf16 --round toward_zero
  CONTAINS "0xC096")
bitexact_cli_test(trace_inexact_decimal_note ARGS trace add 0.1 0 CONTAINS "0x3DCCCCCD"
  ERROR_CONTAINS "not exactly representable in fp32")
bitexact_cli_test(trace_cmp ARGS trace cmp bf16:0xC01A -2.296875 --from bf16 CONTAINS "<")

# --- every malformed-input class: exit 2 and one line on stderr ------------------
bitexact_cli_test(error_no_command RC 2 ARGS frobnicate ONE_LINE_ERROR)
bitexact_cli_test(error_unknown_operation RC 2 ARGS trace fly 1 2 ONE_LINE_ERROR)
bitexact_cli_test(error_operand_count RC 2 ARGS trace add 1 ONE_LINE_ERROR ERROR_CONTAINS "expected 2 operands")
bitexact_cli_test(error_malformed_decimal RC 2 ARGS trace add 1.2.3 1 ONE_LINE_ERROR ERROR_CONTAINS "expected a decimal")
bitexact_cli_test(error_trailing_garbage RC 2 ARGS trace add 1.5x 1 ONE_LINE_ERROR)
bitexact_cli_test(error_exponent_without_digits RC 2 ARGS trace add 1e 1 ONE_LINE_ERROR)
bitexact_cli_test(error_unknown_format_prefix RC 2 ARGS trace add bf17:1 1 ONE_LINE_ERROR ERROR_CONTAINS "unknown format")
bitexact_cli_test(error_pattern_too_wide RC 2 ARGS trace add bf16:0x1C013 bf16:1 ONE_LINE_ERROR
  ERROR_CONTAINS "does not fit in bf16's 16 bits")
bitexact_cli_test(error_pattern_bad_digit RC 2 ARGS trace add bf16:0xC0G3 bf16:1 ONE_LINE_ERROR)
bitexact_cli_test(error_ambiguous_hex RC 2 ARGS trace add 0xC013 1 ONE_LINE_ERROR ERROR_CONTAINS "ambiguous")
bitexact_cli_test(error_hex_float_without_exponent RC 2 ARGS trace add 0x1.8 1 ONE_LINE_ERROR)
bitexact_cli_test(error_empty_operand RC 2 ARGS trace add bf16: 1 ONE_LINE_ERROR)
bitexact_cli_test(error_decimal_overflow RC 2 ARGS trace add 1e39 1 ONE_LINE_ERROR ERROR_CONTAINS "beyond the largest finite")
bitexact_cli_test(error_e4m3_overflow_names_no_infinity RC 2 ARGS trace add e4m3:480 e4m3:1 ONE_LINE_ERROR
                  ERROR_CONTAINS "beyond the largest finite e4m3 value; e4m3 has no infinity: write nan")
bitexact_cli_test(error_e4m3_infinity RC 2 ARGS trace add e4m3:inf e4m3:1 ONE_LINE_ERROR ERROR_CONTAINS "no infinity")
bitexact_cli_test(error_inexact_refused RC 2 ARGS trace add 0.1 1 --exact-operands ONE_LINE_ERROR)
bitexact_cli_test(error_mixed_formats_without_to RC 2 ARGS trace add bf16:1 fp32:1 ONE_LINE_ERROR ERROR_CONTAINS "--to")
# No --to can help bf16 with fp16: the message must not advise one, and its own advice must work.
bitexact_cli_test(error_mixed_formats_unsupported RC 2 ARGS trace add bf16:1 fp16:1 --to bf16 ONE_LINE_ERROR
  ERROR_CONTAINS "operands of bf16 and fp16 cannot be mixed" "write both in one format, e.g. bf16:1")
bitexact_cli_test(error_mixed_formats_unsupported_without_to RC 2 ARGS trace add bf16:1 fp16:1 ONE_LINE_ERROR
  ERROR_CONTAINS "cannot be mixed")
bitexact_cli_test(error_convert_without_to RC 2 ARGS trace convert 1 ONE_LINE_ERROR)
bitexact_cli_test(error_unknown_option RC 2 ARGS trace add 1 1 --frobnicate ONE_LINE_ERROR)
bitexact_cli_test(error_option_without_value RC 2 ARGS trace add 1 1 --to ONE_LINE_ERROR)
bitexact_cli_test(error_bad_rounding_mode RC 2 ARGS trace add 1 1 --round sideways ONE_LINE_ERROR
  ERROR_CONTAINS "expected one of nearest_even (or rne, near_even, nearest), nearest_away (or rna, near_maxMag)")
bitexact_cli_test(error_bad_format_name RC 2 ARGS trace add 1 1 --to fp64 ONE_LINE_ERROR)
bitexact_cli_test(error_bad_output_style RC 2 ARGS trace add 1 1 --output html ONE_LINE_ERROR)
bitexact_cli_test(error_bad_tininess RC 2 ARGS trace add 1 1 --tininess never ONE_LINE_ERROR
  ERROR_CONTAINS "--tininess expects after_rounding (or after), before_rounding (or before), not 'never'")
# The Python binding's spellings of tininess and NaN policy work here too (one table, core/names.hpp).
bitexact_cli_test(tininess_python_spelling ARGS trace mul bf16:0x3F7E bf16:0x0081 --tininess before_rounding
  CONTAINS "tiny (before_rounding)" "flags        underflow|inexact")
bitexact_cli_test(nan_python_spelling ARGS trace add 1 2 --nan cuda --to bf16 CONTAINS "tininess after_rounding, canonical NaN")
bitexact_cli_test(error_bad_nan RC 2 ARGS trace add 1 1 --nan quiet ONE_LINE_ERROR
  ERROR_CONTAINS "--nan expects ieee_propagate (or ieee), canonical (or cuda), not 'quiet'")
bitexact_cli_test(error_bad_random_bits RC 2 ARGS trace add 1 1 --round stochastic --random-bits 0x1FFFFFFFF ONE_LINE_ERROR)
bitexact_cli_test(error_stochastic_without_bits RC 2 ARGS trace add 1 1 --round stochastic ONE_LINE_ERROR)
bitexact_cli_test(error_eval_unknown_function RC 2 ARGS eval f64_add ONE_LINE_ERROR)
bitexact_cli_test(error_eval_no_function RC 2 ARGS eval ONE_LINE_ERROR)

# --- trace mma: one tensor-core step; expected bits worked out by hand ------------------------
# docs/hardware.md's worked step (tests/test_mma_trace.cpp), padded with zero products, which do
# not move e_max (their exponent is -133): 2 + 2^-18 + 2^-20 + 2^-21 + 2^-22 + 2^-23 after p2's
# bit at 2^-32 is cut, half an ulp above 0x40000017, kept by round toward zero.
set(mma_zeros "0,0,0,0,0,0,0,0,0,0,0,0")
bitexact_cli_test(trace_mma_worked_step ARGS trace mma
  "bf16:0x3F80,bf16:0x3FC0,bf16:0x3F81,bf16:0x3FC0,${mma_zeros}"
  "bf16:0x3F80,bf16:0x3580,bf16:0x3681,bf16:0x3400,${mma_zeros}" fp32:0x3F800001
  CONTAINS "fused multiply-add step: 16 products + C -> fp32" "e_max = 0" "truncated 0000001" "fp32:0x40000017"
  "round toward zero")
# docs/how-the-gpu-adds.md: C = 1 and p0 = -1 cancel, but set e_max = 0 (window 2^-25); products
# 3 * 2^-26 (odd k) keep 2^-25, products 3 * 2^-27 (even k) are lost: 8 * 2^-25 = 2^-22
# (0x34800000). One FMA per product adds them exactly: 8 * 3 * 2^-26 + 7 * 3 * 2^-27 = 69 * 2^-27
# = 1.078125 * 2^-21 (0x350A0000).
set(mma_small "0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13,0x1.8p-13")
set(mma_alternating "0x1p-12,0x1p-13,0x1p-12,0x1p-13,0x1p-12,0x1p-13,0x1p-12,0x1p-13,0x1p-12,0x1p-13,0x1p-12,0x1p-13,0x1p-12,0x1p-13,0x1p-12")
bitexact_cli_test(trace_mma_lost_terms ARGS trace mma "-1,${mma_small}" "1,${mma_alternating}" 1 --compare
  CONTAINS "fused sum of the kept terms: 8 × 2^-25" "result\n               fp32:0x34800000"
  "compared with one rounding per product" "result       fp32:0x350A0000" "error        0 (exact)")
# fp16 accumulation rounds to nearest even: 1 + 2^-11 + 2^-20 is above the tie between 0x3C00
# and 0x3C01 (toward zero would keep 0x3C00).
bitexact_cli_test(trace_mma_fp16_accumulator ARGS trace mma "0x1p-11,0x1p-10,0,0,0,0,0,0,0,0,0,0,0,0,0,0"
  "1,0x1p-10,0,0,0,0,0,0,0,0,0,0,0,0,0,0" 1 --from fp16 --to fp16 CONTAINS "-> fp16" "fp16:0x3C01"
  "round to nearest, ties to even")
# Four products of 2^-25 on C = 1: sm90's window (2^-25) keeps them, 1 + 2^-23 (0x3F800001);
# sm80's (24 bits, 2^-24) cuts them all, 1 (0x3F800000).
bitexact_cli_test(trace_mma_sm90_window ARGS trace mma "0x1p-12,0x1p-12,0x1p-12,0x1p-12,${mma_zeros}"
  "0x1p-13,0x1p-13,0x1p-13,0x1p-13,${mma_zeros}" 1 CONTAINS "fp32:0x3F800001")
bitexact_cli_test(trace_mma_sm80_window ARGS trace mma 0x1p-12,0x1p-12,0x1p-12,0x1p-12,0,0,0,0
  0x1p-13,0x1p-13,0x1p-13,0x1p-13,0,0,0,0 1 --unit sm80 CONTAINS "8 products + C" "2^-24" "fp32:0x3F800000")
bitexact_cli_test(trace_mma_json ARGS trace mma "1,${mma_small}" "1,${mma_alternating}" 0 --output json
  CONTAINS "\"operation\": \"fused_multiply_add_step\"" "\"max_exponent\": 0, \"lsb_exponent\": -25")
bitexact_cli_test(trace_mma_help ARGS trace mma --help CONTAINS "usage: bitexact trace mma A B C" "--unit UNIT" "sm80: mma.sync m16n8k16 on sm_80"
  "nothing is padded")
bitexact_cli_test(error_trace_mma_count RC 2 ARGS trace mma 1,1 1,1 0 ONE_LINE_ERROR
  ERROR_CONTAINS "the sm90 unit sums 16 products a step; A has 2 values and B 2")
bitexact_cli_test(error_trace_mma_mixed_factors RC 2 ARGS trace mma "fp16:1,${mma_small}" "1,${mma_alternating}" 0
  ONE_LINE_ERROR ERROR_CONTAINS "A[1] is bf16 but A[0] is fp16")
bitexact_cli_test(error_trace_mma_fp16_accumulator_bf16 RC 2 ARGS trace mma "1,${mma_small}" "1,${mma_alternating}"
  fp16:0 ONE_LINE_ERROR ERROR_CONTAINS "an fp16 accumulator takes fp16, e4m3 or e5m2 factors")
# tf32 on sm90_k8 (wgmma k8): four products of 2^-25 on C = 1 stay in the 25-bit window, 1 + 2^-23.
bitexact_cli_test(trace_mma_tf32 ARGS trace mma 0x1p-12,0x1p-12,0x1p-12,0x1p-12,0,0,0,0
  0x1p-13,0x1p-13,0x1p-13,0x1p-13,0,0,0,0 1 --unit sm90_k8 --from tf32 CONTAINS "8 products + C" "fp32:0x3F800001")
# fp8 into fp16 rounds the step's sum once, to nearest (capture_lowp's wgmma k32 .f16): 1.5 + 0.5
# + 2^-10 + 2^-13 = 2 + 2^-10 + 2^-13 is above the tie between 0x4000 and 0x4001; rounding first
# toward zero to E8M13 (2^-12 at 2) would leave the tie and give 0x4000.
set(mma_fp8_zeros "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0")
bitexact_cli_test(trace_mma_fp8_fp16_accumulator ARGS trace mma "0.5,0x1p-5,0x1p-6,${mma_fp8_zeros}"
  "1,0x1p-5,0x1p-7,${mma_fp8_zeros}" fp16:0x3E00 --unit sm90_fp8 --from e4m3 CONTAINS "32 products + C -> fp16"
  "fp16:0x4001")
bitexact_cli_test(error_trace_mma_empty_value RC 2 ARGS trace mma 1,,1 1 0 ONE_LINE_ERROR ERROR_CONTAINS "A[1] is empty")
bitexact_cli_test(error_trace_mma_arguments RC 2 ARGS trace mma 1,1 ONE_LINE_ERROR ERROR_CONTAINS "expected A, B and C")
bitexact_cli_test(error_trace_mma_rounding RC 2 ARGS trace mma 1 1 0 --round upward ONE_LINE_ERROR
  ERROR_CONTAINS "the tensor core's rounding is fixed")
bitexact_cli_test(error_trace_mma_compare_json RC 2 ARGS trace mma 1 1 0 --compare --output json ONE_LINE_ERROR)
bitexact_cli_test(error_trace_mma_not_first RC 2 ARGS trace --output md mma 1 1 0 ONE_LINE_ERROR
  ERROR_CONTAINS "write mma first")
bitexact_cli_test(error_trace_mma_to_with_prefixed_c RC 2 ARGS trace mma 1 1 fp32:0 --to fp32 ONE_LINE_ERROR
  ERROR_CONTAINS "--to cannot change the result")

# --- trace ex2: MUFU.EX2 on one input, against GPU outputs in tests/data/mufu_samples.bxs ------
# Captured on the H200 (ex2.approx.ftz.f32): 0xBF851FA9 (-1.0400287) -> 0x3EF8FEA4 and 0xBF008000
# (-0.501953125) -> 0x3F34C641; 2^x rounded to nearest (exp2l in long double, then to float) is
# 0x3EF8FEA6 and 0x3F34C642. |x| * 2^23 = 8724393 = 2^23 + 335785.
bitexact_cli_test(trace_ex2_two_steps_low ARGS trace ex2 fp32:0xBF851FA9
  CONTAINS "n = 1, k = 335785" "result\n               fp32:0x3EF8FEA4" "nearest      fp32:0x3EF8FEA6"
  "2 fp32 steps below the correctly rounded one")
bitexact_cli_test(trace_ex2_one_step_low ARGS trace ex2 -0.501953125 CONTAINS "n = 0, k = 4210688" "fp32:0x3F34C641"
  "nearest      fp32:0x3F34C642")
# Off the grid, also captured: -1.5 * 2^-24 (0xB3400000) is cut to q = 0 and the unit returns
# exactly 1, while 2^x = 1 - 3.1e-8 lies beyond half an ulp (2^-25) below 1: 0x3F7FFFFF.
bitexact_cli_test(trace_ex2_off_grid ARGS trace ex2 fp32:0xB3400000 CONTAINS "x has bits below 2^-23" "fp32:0x3F800000"
  "nearest      fp32:0x3F7FFFFF")
bitexact_cli_test(trace_ex2_overflow ARGS trace ex2 128 CONTAINS "fp32:0x7F800000" "x >= 128")
bitexact_cli_test(trace_ex2_flushed ARGS trace ex2 -130 CONTAINS "fp32:0x00000000" "flushes it to +0")
bitexact_cli_test(trace_ex2_nan ARGS trace ex2 nan CONTAINS "fp32:0x7FFFFFFF" "no finite comparison")
bitexact_cli_test(trace_ex2_json ARGS trace ex2 fp32:0xBF851FA9 --output json
  CONTAINS "\"table\": \"ex2.negative\", \"index\": 335785" "\"result\": \"0x3EF8FEA4\"" "\"correctly_rounded\": \"0x3EF8FEA6\"")
bitexact_cli_test(trace_ex2_help ARGS trace ex2 --help CONTAINS "usage: bitexact trace ex2 X" "MUFU.EX2")
bitexact_cli_test(error_trace_ex2_not_fp32 RC 2 ARGS trace ex2 bf16:1 ONE_LINE_ERROR ERROR_CONTAINS "takes fp32")
bitexact_cli_test(error_trace_ex2_two_operands RC 2 ARGS trace ex2 1 2 ONE_LINE_ERROR ERROR_CONTAINS "expected one fp32 operand")
bitexact_cli_test(error_trace_ex2_inexact RC 2 ARGS trace ex2 0.1 --exact-operands ONE_LINE_ERROR)

# --- eval: TestFloat lines, expected results worked out by hand ----------------------
# Each case's comment says why its result and flags are what they are.
file(WRITE ${BITEXACT_CLI_DATA}/f32_add.in
  "3F800000 3F800000\n"   # 1 + 1 = 2, exact
  "3f800000 33800000\n"   # 1 + 2^-24: exactly half an ulp, ties to even keeps 1; inexact (lower case in)
  "3F800000 33800001\n"   # just above half an ulp: rounds up to 1 + 2^-23
  "7F7FFFFF 7F7FFFFF\n"   # max + max overflows to +inf: overflow | inexact
  "\n"                    # blank lines carry no case
  "7F800000 FF800000\n"   # inf - inf: invalid, x86 default NaN
  "00800000 80000001\n"   # 2^-126 - 2^-149: an exact subnormal, no flags
  "C01A0E2E C0130000\n"   # the paper's sum, exact in fp32
  "7FA00000 3F800000\n")  # signaling NaN: quieted, invalid
file(WRITE ${BITEXACT_CLI_DATA}/f32_add.expected
  "3F800000 3F800000 40000000 00\n"
  "3F800000 33800000 3F800000 01\n"
  "3F800000 33800001 3F800001 01\n"
  "7F7FFFFF 7F7FFFFF 7F800000 05\n"
  "7F800000 FF800000 FFC00000 10\n"
  "00800000 80000001 007FFFFF 00\n"
  "C01A0E2E C0130000 C0968717 00\n"
  "7FA00000 3F800000 7FE00000 10\n")
bitexact_cli_test(eval_f32_add ARGS eval f32_add INPUT ${BITEXACT_CLI_DATA}/f32_add.in
  EXPECT ${BITEXACT_CLI_DATA}/f32_add.expected)

file(WRITE ${BITEXACT_CLI_DATA}/f32_add_minmag.in "3F800000 33800001\nBF800000 B3800001\n")
# Toward zero, 1 + (just over half an ulp) truncates to 1; the same for the negatives.
file(WRITE ${BITEXACT_CLI_DATA}/f32_add_minmag.expected "3F800000 33800001 3F800000 01\nBF800000 B3800001 BF800000 01\n")
bitexact_cli_test(eval_f32_add_testfloat_rounding ARGS eval f32_add -rminMag INPUT ${BITEXACT_CLI_DATA}/f32_add_minmag.in
  EXPECT ${BITEXACT_CLI_DATA}/f32_add_minmag.expected)

file(WRITE ${BITEXACT_CLI_DATA}/f32_mul.in "3FC00000 3FC00000\n00000001 3F000000\n")
# 1.5 * 1.5 = 2.25 exactly; 2^-149 * 0.5 = 2^-150 ties between 0 and 2^-149 and goes to even 0: underflow | inexact.
file(WRITE ${BITEXACT_CLI_DATA}/f32_mul.expected "3FC00000 3FC00000 40100000 00\n00000001 3F000000 00000000 03\n")
bitexact_cli_test(eval_f32_mul ARGS eval f32_mul INPUT ${BITEXACT_CLI_DATA}/f32_mul.in EXPECT ${BITEXACT_CLI_DATA}/f32_mul.expected)

file(WRITE ${BITEXACT_CLI_DATA}/f32_to_bf16.in "C0968717\n3F808000\n3F818000\n")
# The paper's rounding (guard 1, sticky set: up); then two exact ties: 1+2^-8 stays 1 (even), 1+3*2^-8 goes up to even.
file(WRITE ${BITEXACT_CLI_DATA}/f32_to_bf16.expected "C0968717 C097 01\n3F808000 3F80 01\n3F818000 3F82 01\n")
bitexact_cli_test(eval_f32_to_bf16 ARGS eval f32_to_bf16 INPUT ${BITEXACT_CLI_DATA}/f32_to_bf16.in
  EXPECT ${BITEXACT_CLI_DATA}/f32_to_bf16.expected)

file(WRITE ${BITEXACT_CLI_DATA}/e4m3_add.in "7E 7E\n38 38\n")
# 448 + 448 overflows; E4M3FN has no infinity, so the result is its NaN 0x7F: overflow | inexact. 1 + 1 = 2 exactly.
file(WRITE ${BITEXACT_CLI_DATA}/e4m3_add.expected "7E 7E 7F 05\n38 38 40 00\n")
bitexact_cli_test(eval_e4m3_add ARGS eval e4m3_add INPUT ${BITEXACT_CLI_DATA}/e4m3_add.in EXPECT ${BITEXACT_CLI_DATA}/e4m3_add.expected)

file(WRITE ${BITEXACT_CLI_DATA}/f32_lt.in "3F800000 40000000\n7FC00000 3F800000\n")
# 1 < 2; a quiet NaN makes the signaling lt unordered (false) and invalid.
file(WRITE ${BITEXACT_CLI_DATA}/f32_lt.expected "3F800000 40000000 1 00\n7FC00000 3F800000 0 10\n")
bitexact_cli_test(eval_f32_lt ARGS eval f32_lt INPUT ${BITEXACT_CLI_DATA}/f32_lt.in EXPECT ${BITEXACT_CLI_DATA}/f32_lt.expected)

file(WRITE ${BITEXACT_CLI_DATA}/f32_to_i32.in "3FC00000\n4F000000\n")
# 1.5 rounds to even 2 (no inexact without -exact); 2^31 is out of int32 range: x86's indefinite 0x80000000, invalid.
file(WRITE ${BITEXACT_CLI_DATA}/f32_to_i32.expected "3FC00000 00000002 00\n4F000000 80000000 10\n")
bitexact_cli_test(eval_f32_to_i32 ARGS eval f32_to_i32 INPUT ${BITEXACT_CLI_DATA}/f32_to_i32.in EXPECT ${BITEXACT_CLI_DATA}/f32_to_i32.expected)

file(WRITE ${BITEXACT_CLI_DATA}/i32_to_f32.in "FFFFFFFF\n01000001\n")
# -1 exactly; 2^24 + 1 ties between 2^24 and 2^24 + 2 and goes to even 2^24.
file(WRITE ${BITEXACT_CLI_DATA}/i32_to_f32.expected "FFFFFFFF BF800000 00\n01000001 4B800000 01\n")
bitexact_cli_test(eval_i32_to_f32 ARGS eval i32_to_f32 INPUT ${BITEXACT_CLI_DATA}/i32_to_f32.in EXPECT ${BITEXACT_CLI_DATA}/i32_to_f32.expected)

file(WRITE ${BITEXACT_CLI_DATA}/bad_lines.in "3F800000 3F800000\nzz 3F800000\n3F800000\n3F800000 3F800000 1\n123456789 0\n40000000 40000000\n")
file(WRITE ${BITEXACT_CLI_DATA}/bad_lines.expected "3F800000 3F800000 40000000 00\n40000000 40000000 40800000 00\n")
bitexact_cli_test(eval_bad_lines_continue RC 1 ARGS eval f32_add INPUT ${BITEXACT_CLI_DATA}/bad_lines.in
  EXPECT ${BITEXACT_CLI_DATA}/bad_lines.expected ERROR_CONTAINS "line 2:" "line 3:" "line 4:" "line 5:")
bitexact_cli_test(eval_bad_line_stops RC 2 ARGS eval f32_add --stop-on-error INPUT ${BITEXACT_CLI_DATA}/bad_lines.in
  CONTAINS "3F800000 3F800000 40000000 00" ERROR_CONTAINS "line 2:")

# --- demo ------------------------------------------------------------------------------
bitexact_cli_test(demo ARGS demo --additions 1000
  CONTAINS "0xC0968717" "0xC097" "-0.014759540557861328" "01 + 11 = 10[0]" "with residue")

# --- output that cannot be written is a failure (Linux: /dev/full refuses every write) ---
if(EXISTS /dev/full)
  file(WRITE ${BITEXACT_CLI_DATA}/one_f32_add.in "3F800000 3F800000\n")
  foreach(command IN ITEMS "trace|add|1|2" "demo|--additions|10" "--help" "eval|f32_add")
    string(REGEX REPLACE "^-*([a-z]+).*" "\\1" command_name "${command}")
    string(REPLACE "|" ";" command_arguments "${command}")
    bitexact_cli_test(full_disk_${command_name} RC 2 ARGS ${command_arguments} OUTPUT_FILE /dev/full
      INPUT ${BITEXACT_CLI_DATA}/one_f32_add.in ONE_LINE_ERROR ERROR_CONTAINS "cannot write to stdout")
  endforeach()
endif()

# --- echoed input is quoted, escaped and shortened ----------------------------------------
string(ASCII 27 escape)  # ESC c resets a terminal; a [ would split the CMake list
bitexact_cli_test(error_escape_sequence_escaped RC 2 ARGS trace add "${escape}cred" 1 ONE_LINE_ERROR
  ERROR_CONTAINS "'\\x1Bcred'")
string(REPEAT "1" 100000 long_operand)
bitexact_cli_test(error_long_operand_shortened RC 2 ARGS trace add ${long_operand} 1 ONE_LINE_ERROR
  ERROR_CONTAINS "111...' (100000 characters) has too many digits")
# A NUL in an eval line is shown, not taken for the end of the message.
bitexact_cli_test(eval_nul_escaped RC 1 ARGS eval f32_add INPUT ${CMAKE_CURRENT_LIST_DIR}/cli/nul_in_line.in
  ERROR_CONTAINS "got '3F80\\x00 3F800000'")

# --- one rule for options: --name VALUE or --name=VALUE, each once, none without effect --------
bitexact_cli_test(option_equals_form_trace ARGS trace convert 1.5 --from=bf16 --to=fp16 --round=rtz --output=json
  CONTAINS "\"bits\": \"0x3E00\"")
bitexact_cli_test(option_equals_form_eval ARGS eval f32_add --round=minMag INPUT ${BITEXACT_CLI_DATA}/f32_add_minmag.in
  EXPECT ${BITEXACT_CLI_DATA}/f32_add_minmag.expected)
bitexact_cli_test(option_equals_form_demo ARGS demo --additions=10 --output=md CONTAINS "with residue")
bitexact_cli_test(error_repeated_option RC 2 ARGS trace add 1 1 --to bf16 --to=fp16 ONE_LINE_ERROR
  ERROR_CONTAINS "--to is given twice")
bitexact_cli_test(error_repeated_rounding_spellings RC 2 ARGS eval f32_add --round rtz -rminMag ONE_LINE_ERROR
  ERROR_CONTAINS "--round is given twice")
bitexact_cli_test(error_flag_with_value RC 2 ARGS trace add 1 1 --ftz=1 ONE_LINE_ERROR ERROR_CONTAINS "takes no value")
bitexact_cli_test(error_random_bits_without_stochastic RC 2 ARGS trace add 1 1 --random-bits 5 ONE_LINE_ERROR
  ERROR_CONTAINS "--random-bits is read only by --round stochastic")
bitexact_cli_test(error_to_on_comparison RC 2 ARGS trace cmp 1 2 --to bf16 ONE_LINE_ERROR ERROR_CONTAINS "a comparison")
bitexact_cli_test(error_rounding_on_comparison RC 2 ARGS trace cmp 1 2 --round rtz ONE_LINE_ERROR
  ERROR_CONTAINS "--round cannot change the result")
bitexact_cli_test(trace_cmp_daz ARGS trace cmp fp32:0x00000001 0 --daz CONTAINS "==")
bitexact_cli_test(error_from_with_every_operand_prefixed RC 2 ARGS trace add bf16:1 bf16:1 --from fp16 ONE_LINE_ERROR
  ERROR_CONTAINS "--from cannot change the result")
bitexact_cli_test(error_eval_exact_on_add RC 2 ARGS eval f32_add --exact ONE_LINE_ERROR
  ERROR_CONTAINS "--exact cannot change the result")
bitexact_cli_test(error_eval_notexact_on_add RC 2 ARGS eval f32_add -notexact ONE_LINE_ERROR
  ERROR_CONTAINS "-notexact cannot change the result")
bitexact_cli_test(error_eval_ftz_on_comparison RC 2 ARGS eval f32_lt --ftz ONE_LINE_ERROR
  ERROR_CONTAINS "--ftz cannot change the result")
bitexact_cli_test(error_eval_list_with_more RC 2 ARGS eval --list f32_add ONE_LINE_ERROR)
bitexact_cli_test(error_demo_json RC 2 ARGS demo --output json ONE_LINE_ERROR ERROR_CONTAINS "not one JSON document")

# --- tf32: 19-bit patterns, or fp32's bits as a GPU holds them --------------------------------
file(WRITE ${BITEXACT_CLI_DATA}/tf32_add.in "FFFFF 1FC00\n1FC00 1FC00\n3F800000 1FC00\n")
file(WRITE ${BITEXACT_CLI_DATA}/tf32_add.expected "1FC00 1FC00 20000 00\n")
bitexact_cli_test(eval_tf32_operand_too_wide RC 1 ARGS eval tf32_add INPUT ${BITEXACT_CLI_DATA}/tf32_add.in
  EXPECT ${BITEXACT_CLI_DATA}/tf32_add.expected
  ERROR_CONTAINS "line 1: operand 1 FFFFF does not fit in 19 bits" "line 3: tf32 values are 19 bits")
bitexact_cli_test(trace_tf32_in_fp32_bits ARGS trace add tf32:fp32:0x3F800000 tf32:0x1FC00 CONTAINS "tf32:0x20000 (2)")
bitexact_cli_test(error_tf32_in_fp32_low_bits RC 2 ARGS trace add tf32:fp32:0x3F800001 tf32:1 ONE_LINE_ERROR
  ERROR_CONTAINS "low 13 bits 0x1")

# --- eval --check: lines that carry the expected result and flags -----------------------------
file(WRITE ${BITEXACT_CLI_DATA}/check_agrees.in
  "# f32_add as testfloat_gen writes it\n"
  "3F800000 3F800000 40000000 00\n"
  "3F800000 33800000 3F800000 01\n")
bitexact_cli_test(eval_check_agrees ARGS eval f32_add --check INPUT ${BITEXACT_CLI_DATA}/check_agrees.in
  CONTAINS "f32_add --check: 2 cases compared, 0 mismatches\n")
# Line 3 claims 1 + 2^-24 rounds up (ties to even keeps 1); line 4 claims no inexact flag.
file(WRITE ${BITEXACT_CLI_DATA}/check_mismatch.in
  "3F800000 3F800000 40000000 00\n"
  "# a GPU capture\n"
  "3F800000 33800000 3F800001 01\n"
  "3F800000 33800001 3F800001 00\n")
bitexact_cli_test(eval_check_mismatch RC 1 ARGS eval f32_add --check INPUT ${BITEXACT_CLI_DATA}/check_mismatch.in
  CONTAINS "f32_add --check: 3 cases compared, 2 mismatches\n"
  "first mismatch, line 3: f32_add 3F800000 33800000\n  capture 3F800001 01 (inexact)\n  model   3F800000 01 (inexact)"
  "0x3F800001                         0x3F800000   <- differs" "guard 1 | round 0 | sticky bits 0")
# One case, one mismatch: the counts read in the singular.
file(WRITE ${BITEXACT_CLI_DATA}/check_one_mismatch.in "3F800000 33800000 3F800001 01\n")
bitexact_cli_test(eval_check_one_mismatch RC 1 ARGS eval f32_add --check INPUT ${BITEXACT_CLI_DATA}/check_one_mismatch.in
  CONTAINS "f32_add --check: 1 case compared, 1 mismatch\n")
bitexact_cli_test(eval_check_bad_line RC 2 ARGS eval f32_add --check INPUT ${BITEXACT_CLI_DATA}/f32_add.in
  CONTAINS "0 cases compared, 0 mismatches, 8 bad lines" ERROR_CONTAINS "the expected result (8 digits) and flags")
file(WRITE ${BITEXACT_CLI_DATA}/comments_only.in "# nothing\n\n")
bitexact_cli_test(eval_check_no_cases RC 2 ARGS eval f32_add --check INPUT ${BITEXACT_CLI_DATA}/comments_only.in
  ONE_LINE_ERROR ERROR_CONTAINS "no cases")
file(WRITE ${BITEXACT_CLI_DATA}/comments.in
  "# operands of f32_add\n3F800000 3F800000\n  # indented\n3F800000 33800000\n")
file(WRITE ${BITEXACT_CLI_DATA}/comments.expected "3F800000 3F800000 40000000 00\n3F800000 33800000 3F800000 01\n")
bitexact_cli_test(eval_comment_lines ARGS eval f32_add INPUT ${BITEXACT_CLI_DATA}/comments.in
  EXPECT ${BITEXACT_CLI_DATA}/comments.expected)

# --- attention: PyTorch's flash forward on captured heads (tests/data/attention) ------------------
set(attention_data ${CMAKE_CURRENT_LIST_DIR}/data/attention)
set(attention_small ${CMAKE_CURRENT_LIST_DIR}/cli)
set(n17 ${attention_data}/split_d64_n17_causal_normal_h1)
set(n1000 ${attention_data}/split_d64_n1000_full_special_h0)
bitexact_cli_test(attention_help ARGS attention --help CONTAINS "usage: bitexact attention Q.npy K.npy V.npy"
  "or float32 only if every" "--batch-heads B,H" "mufu_ex2.bxt" "pytorch_sdpa_flash_sm90")
bitexact_cli_test(attention_help_command ARGS help attention CONTAINS "usage: bitexact attention")
# One head of a B 1, H 2 call: the single-split kernel, O and L bit for bit.
bitexact_cli_test(attention_agrees_single_kernel ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --causal
  --batch-heads 1,2 --expect-o ${n17}/o.npy --expect-lse ${n17}/lse.npy
  CONTAINS "1 split (the heuristic's for B 1, H 2, from --batch-heads), tiles 128 rows x 128 keys"
  "O: 1088 elements compared, 0 mismatches\nL: 17 elements compared, 0 mismatches\n")
# Four splits and the combine kernel.
bitexact_cli_test(attention_agrees_split_kernel ARGS attention ${n1000}/q.npy ${n1000}/k.npy ${n1000}/v.npy
  --batch-heads 1,4 --expect-o ${n1000}/o.npy --expect-lse ${n1000}/lse.npy
  CONTAINS "4 splits (the heuristic's for B 1, H 4, from --batch-heads), tiles 64 rows x 256 keys, 4 K/V blocks"
  "O: 64000 elements compared, 0 mismatches\nL: 1000 elements compared, 0 mismatches\n")
# The same head on an H100 PCIe's 114 SMs: PyTorch's heuristic takes 2 splits there, and the bits differ from
# the H100 SXM's capture; the names come from the GPU records.
bitexact_cli_test(attention_gpu_decides_split_count RC 1 ARGS attention ${n1000}/q.npy ${n1000}/k.npy ${n1000}/v.npy
  --batch-heads 1,4 --gpu h100_pcie --expect-o ${n1000}/o.npy
  CONTAINS "2 splits (the heuristic's for B 1, H 4, from --batch-heads), tiles 64 rows x 256 keys")
bitexact_cli_test(attention_gpu_h200_is_the_captures ARGS attention ${n1000}/q.npy ${n1000}/k.npy ${n1000}/v.npy
  --batch-heads 1,4 --gpu h200 --expect-o ${n1000}/o.npy CONTAINS "O: 64000 elements compared, 0 mismatches")
# --threads: the split kernel's capture on 3 threads and on 1, and 2 heads on 3 threads; the same bits, and
# piped, nothing on stderr (the progress line is a terminal's only).
bitexact_cli_test(attention_threads_agree ARGS attention ${n1000}/q.npy ${n1000}/k.npy ${n1000}/v.npy
  --batch-heads 1,4 --threads 3 --expect-o ${n1000}/o.npy --expect-lse ${n1000}/lse.npy QUIET_STDERR
  CONTAINS "O: 64000 elements compared, 0 mismatches\nL: 1000 elements compared, 0 mismatches\n")
bitexact_cli_test(attention_one_thread_agrees ARGS attention ${n1000}/q.npy ${n1000}/k.npy ${n1000}/v.npy
  --batch-heads 1,4 --threads=1 --expect-o ${n1000}/o.npy --expect-lse ${n1000}/lse.npy QUIET_STDERR
  CONTAINS "O: 64000 elements compared, 0 mismatches\nL: 1000 elements compared, 0 mismatches\n")
bitexact_cli_test(attention_threads_agree_heads ARGS attention ${attention_small}/attention_b1h2_q.npy
  ${attention_small}/attention_b1h2_k.npy ${attention_small}/attention_b1h2_v.npy --causal --threads 3
  --expect-o ${attention_small}/attention_b1h2_o.npy --expect-lse ${attention_small}/attention_b1h2_lse.npy
  QUIET_STDERR CONTAINS "O: 2176 elements compared, 0 mismatches\nL: 34 elements compared, 0 mismatches\n")
bitexact_cli_test(attention_error_threads RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --threads -1
  ONE_LINE_ERROR ERROR_CONTAINS "attention: --threads expects an integer from 0 to 1024, not '-1'")
bitexact_cli_test(attention_error_unknown_gpu RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --gpu a100
  ONE_LINE_ERROR ERROR_CONTAINS "--gpu: unknown GPU 'a100'; the GPUs are: h100_sxm, h100_pcie, h200")
bitexact_cli_test(attention_help_lists_gpus ARGS attention --help CONTAINS "--gpu NAME"
  "h100_pcie: NVIDIA H100 PCIe (sm_90, 114 SMs)")
# The n17 head twice as [1, 2, 17, 64]: every head computed, the split count from the files' own B and H.
bitexact_cli_test(attention_agrees_four_dimensional ARGS attention ${attention_small}/attention_b1h2_q.npy
  ${attention_small}/attention_b1h2_k.npy ${attention_small}/attention_b1h2_v.npy --causal
  --expect-o ${attention_small}/attention_b1h2_o.npy --expect-lse ${attention_small}/attention_b1h2_lse.npy
  CONTAINS "Q [1, 2, 17, 64]" "(the heuristic's for B 1, H 2)"
  "O: 2176 elements compared, 0 mismatches\nL: 34 elements compared, 0 mismatches\n")
# Q as float32 holding its bf16 values: read as the same bits.
bitexact_cli_test(attention_float32_input_agrees ARGS attention ${attention_small}/attention_n17_q_f32.npy
  ${n17}/k.npy ${n17}/v.npy --causal --expect-o ${n17}/o.npy --expect-lse ${n17}/lse.npy
  CONTAINS "O: 1088 elements compared, 0 mismatches\nL: 17 elements compared, 0 mismatches\n")
# A wrong scale: exit 1, the first mismatch of O and of L with their indexes, values and the row's splits.
bitexact_cli_test(attention_mismatch_names_first_index RC 1 ARGS attention ${n1000}/q.npy ${n1000}/k.npy
  ${n1000}/v.npy --batch-heads 1,4 --scale 0.2 --expect-o ${n1000}/o.npy --expect-lse ${n1000}/lse.npy
  CONTAINS "scale 0.2 (0x3E4CCCCD)" "O: 64000 elements compared, 14844 mismatches"
  "first mismatch in O at [20, 0] (row, col)\n  file     0xBCD2 (-0.025634765625)\n  model    0xBCBA (-0.022705078125)"
  "row 20: row block 0 (rows 0..63); 4 K/V blocks of 256 keys" "split 3 of 4: block 3 (keys 768..999)"
  "then the combine kernel merged the 4 splits' O and L" "L: 1000 elements compared, 998 mismatches"
  "first mismatch in L at [0] (row)\n  file     0x40E54888")
# One flipped bit in the second head: the index is (b, h, row, col).
bitexact_cli_test(attention_mismatch_four_dimensional_index RC 1 ARGS attention ${attention_small}/attention_b1h2_q.npy
  ${attention_small}/attention_b1h2_k.npy ${attention_small}/attention_b1h2_v.npy --causal
  --expect-o ${attention_small}/attention_b1h2_o_flipped.npy
  CONTAINS "O: 2176 elements compared, 1 mismatch\n  distance in bf16 ulps 1: 1; the model above the file: 0, below: 1\nfirst mismatch in O at [0, 1, 5, 7] (b, h, row, col)"
  "  file     0xBDAA (-0.0830078125)\n  model    0xBDAB (-0.08349609375)"
  "causal: the row sees keys 0..5, its diagonal in block 0\n    one pass: block 0 (keys 0..16)")
# The first mismatch of O explained: its row and every rounding of the element, and where the file's bf16
# value's float32 range lies against the model's value before the conversion.
bitexact_cli_test(attention_mismatch_explained RC 1 ARGS attention ${attention_small}/attention_b1h2_q.npy
  ${attention_small}/attention_b1h2_k.npy ${attention_small}/attention_b1h2_v.npy --causal
  --expect-o ${attention_small}/attention_b1h2_o_flipped.npy
  CONTAINS "O[0, 1, 5, 7] (b, h, row, col) = 0xBDAB (-0.08349609375), as the model computed it"
  "block 0, keys 0..16: max 5.829323, running max 5.829323, alpha (first block), P = 1 at 1 key"
  "the 10 roundings of O[7], in order"
  "        1     0     0 0..15         tensor-core step fp32:0xBE40AAE0"
  "        9     0                     O * (1/l)        fp32:0xBDAB6970"
  "step 10, the conversion to bf16, in full:\nconvert fp32 -> bf16"
  "from -0.08325195 to -0.08276367 convert to; the model's value before the conversion, -0.0836972, lies 59760 float32 ulps (0.912 bf16 ulp) below them")
# --explain on a split head: the four splits block by block, the element's 73 roundings down to the combine.
bitexact_cli_test(attention_explain_split ARGS attention ${attention_data}/split_d64_n1000_causal_ties_positive_h3/q.npy
  ${attention_data}/split_d64_n1000_causal_ties_positive_h3/k.npy
  ${attention_data}/split_d64_n1000_causal_ties_positive_h3/v.npy --causal --batch-heads 1,4 --explain 999,5
  --expect-o ${attention_data}/split_d64_n1000_causal_ties_positive_h3/o.npy
  CONTAINS "O: 64000 elements compared, 0 mismatches" "O[999, 5] (row, col) = 0xBF7F (-0.99609375)"
  "  split 3 of 4:\n    block 3, keys 768..999: max 38, running max 38, alpha (first block), P = 1 at 18 keys"
  "the 73 roundings of O[5]" "       72     3                     combine fma      fp32:0xBF7F3C97"
  "the largest error relative to its result, in full:\nfused multiply-add step: 16 products + C -> fp32"
  "the model's value before the conversion, -0.9970183, lies among them")
# The stabilized preset: no P of the row is 1 where its block's maximum repeats.
bitexact_cli_test(attention_stabilized_explain ARGS attention ${attention_data}/split_d64_n1000_causal_ties_positive_h3/q.npy
  ${attention_data}/split_d64_n1000_causal_ties_positive_h3/k.npy
  ${attention_data}/split_d64_n1000_causal_ties_positive_h3/v.npy --causal --batch-heads 1,4
  --preset pytorch_sdpa_flash_sm90_stabilized --explain 999,5
  CONTAINS "preset pytorch_sdpa_flash_sm90_stabilized: 4 splits" "stabilized softmax: beta 2, eps 0.001"
  "block 0, keys 0..255: max 76, running max 76, alpha (first block), P = 1 at 0 keys, 14 within eps of the block max"
  "O[999, 5] (row, col) = 0xBF80 (-1)")
# The across-blocks preset against our kernel's capture (the H100), and its one requirement.
set(kernel_ties ${CMAKE_CURRENT_LIST_DIR}/data/attention_kernel/d128_n1000_full_ties_negative_h0)
bitexact_cli_test(attention_stabilized_across_blocks ARGS attention ${kernel_ties}/q.npy ${kernel_ties}/k.npy
  ${kernel_ties}/v.npy --batch-heads 1,15 --preset pytorch_sdpa_flash_sm90_stabilized_across_blocks
  --expect-o ${kernel_ties}/o_across.npy --expect-lse ${kernel_ties}/lse_across.npy
  CONTAINS "stabilized softmax across blocks: beta 2, eps 0.001" "O: 128000 elements compared, 0 mismatches"
  "L: 1000 elements compared, 0 mismatches")
bitexact_cli_test(attention_error_across_blocks_scale RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset pytorch_sdpa_flash_sm90_stabilized_across_blocks --scale -0.5 ONE_LINE_ERROR
  ERROR_CONTAINS "kernel pytorch_sdpa_flash_sm90_stabilized_across_blocks needs a positive finite scale, not --scale -0.5")
bitexact_cli_test(attention_stabilized_beta ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --causal
  --preset=pytorch_sdpa_flash_sm90_stabilized --beta 7 --eps 0.01 CONTAINS "stabilized softmax: beta 7, eps 0.01")
bitexact_cli_test(attention_error_beta_without_stabilized RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --beta 2 ONE_LINE_ERROR ERROR_CONTAINS "--beta sets the stabilized softmax; it needs a stabilized preset (pytorch_sdpa_flash_sm90_stabilized, ")
bitexact_cli_test(attention_error_beta_below_one RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset pytorch_sdpa_flash_sm90_stabilized --beta 0.5 ONE_LINE_ERROR ERROR_CONTAINS "--beta expects a finite decimal of at least 1")
bitexact_cli_test(attention_error_negative_eps RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset pytorch_sdpa_flash_sm90_stabilized --eps=-1 ONE_LINE_ERROR ERROR_CONTAINS "--eps expects a finite decimal of at least 0")
bitexact_cli_test(attention_error_explain_outside RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --explain 17,0 ONE_LINE_ERROR ERROR_CONTAINS "--explain expects row,col within Q's shape [17, 64], not '17,0'")
bitexact_cli_test(attention_error_explain_form RC 2 ARGS attention ${attention_small}/attention_b1h2_q.npy
  ${attention_small}/attention_b1h2_k.npy ${attention_small}/attention_b1h2_v.npy --explain 5,7
  ONE_LINE_ERROR ERROR_CONTAINS "--explain expects b,h,row,col within Q's shape [1, 2, 17, 64], not '5,7'")
# The paper's semantics: its PyTorch flash attention in bf16, and the same in double.
bitexact_cli_test(attention_paper_reference_fp64 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --causal
  --preset paper_reference_fp64 --out-o ${BITEXACT_CLI_DATA}/attention_fp64_o.npy
  CONTAINS "scale 0.125, the default d ** -0.5"
  "preset paper_reference_fp64: softmax attention in double, no tiles (O and L written as float64)")
bitexact_cli_test(attention_paper_reference_stabilized ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --causal
  --preset paper_reference_stabilized --eps 0.01 --no-autocast CONTAINS
  "preset paper_reference_stabilized: the paper's flash attention in PyTorch (attention.py, bf16 tensors, no autocast), tiles 512 rows x 512 keys, 1 K/V block"
  "stabilized softmax: beta 2, eps 0.01")
# The paper's arithmetic is not the kernel's: against the H100's output of the tie head, 41% of O differs.
bitexact_cli_test(attention_paper_reference_is_not_the_kernel RC 1 ARGS attention
  ${attention_data}/split_d64_n1000_causal_ties_positive_h3/q.npy ${attention_data}/split_d64_n1000_causal_ties_positive_h3/k.npy
  ${attention_data}/split_d64_n1000_causal_ties_positive_h3/v.npy --causal --preset paper_reference
  --expect-o ${attention_data}/split_d64_n1000_causal_ties_positive_h3/o.npy
  CONTAINS "preset paper_reference: the paper's flash attention in PyTorch (attention.py, under bf16 autocast), tiles 512 rows x 512 keys, 2 K/V blocks"
  "O: 64000 elements compared, 26170 mismatches")
bitexact_cli_test(attention_error_no_autocast RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --no-autocast
  ONE_LINE_ERROR ERROR_CONTAINS "--no-autocast changes the paper_reference, paper_reference_stabilized presets only")
bitexact_cli_test(attention_error_paper_splits RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset paper_reference --splits 2 ONE_LINE_ERROR
  ERROR_CONTAINS "--splits sets the GPU kernel's split-KV path, which preset paper_reference does not have")
bitexact_cli_test(attention_error_paper_explain RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset paper_reference --explain 1,1 ONE_LINE_ERROR ERROR_CONTAINS "--explain traces FA2's arithmetic")
bitexact_cli_test(attention_error_fp64_expect RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset paper_reference_fp64 --expect-o ${n17}/o.npy ONE_LINE_ERROR
  ERROR_CONTAINS "paper_reference_fp64 computes in double" "--expect-o and --expect-lse need another preset")
# --splits 1 where PyTorch split in 4: the single kernel's tiles, and L differs.
bitexact_cli_test(attention_splits_override RC 1 ARGS attention ${attention_data}/split_d128_n1000_causal_ties_negative_h1/q.npy
  ${attention_data}/split_d128_n1000_causal_ties_negative_h1/k.npy
  ${attention_data}/split_d128_n1000_causal_ties_negative_h1/v.npy --causal --splits=1
  --expect-lse ${attention_data}/split_d128_n1000_causal_ties_negative_h1/lse.npy
  CONTAINS "1 split (from --splits), tiles 128 rows x 64 keys, 16 K/V blocks" "L: 1000 elements compared, 572 mismatches"
  "one pass: blocks 1 down to 0 (keys 0..127)")
# Q's rows may differ from K's without --causal.
bitexact_cli_test(attention_cross_lengths ARGS attention ${n17}/q.npy ${n1000}/k.npy ${n1000}/v.npy
  CONTAINS "Q [17, 64], K and V [1000, 64], not causal" "4 splits (the heuristic's for B 1, H 1)")
# --out-o and --out-lse write what PyTorch wrote, byte for byte (the captures were saved by numpy.save).
bitexact_cli_test(attention_writes_outputs ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --causal
  --out-o ${BITEXACT_CLI_DATA}/attention_o.npy --out-lse ${BITEXACT_CLI_DATA}/attention_lse.npy CONTAINS "1 split")
add_test(NAME cli_attention_written_o_is_the_capture
  COMMAND ${CMAKE_COMMAND} -E compare_files ${BITEXACT_CLI_DATA}/attention_o.npy ${n17}/o.npy)
add_test(NAME cli_attention_written_lse_is_the_capture
  COMMAND ${CMAKE_COMMAND} -E compare_files ${BITEXACT_CLI_DATA}/attention_lse.npy ${n17}/lse.npy)
set_tests_properties(cli_attention_writes_outputs PROPERTIES FIXTURES_SETUP attention_outputs)
set_tests_properties(cli_attention_written_o_is_the_capture cli_attention_written_lse_is_the_capture
  PROPERTIES FIXTURES_REQUIRED attention_outputs)

# Bad input: one line naming the file (or the option) and what was expected, exit 2.
bitexact_cli_test(attention_error_missing_file RC 2 ARGS attention ${attention_small}/attention_missing.npy
  ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR ERROR_CONTAINS "attention_missing.npy: cannot open")
# Forged headers: a shape whose byte count wraps std::size_t, or a negative extent, is refused as such.
bitexact_cli_test(attention_error_forged_shape_wraps RC 2 ARGS attention ${attention_small}/forged_shape_2e62_2e62.npy
  ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR ERROR_CONTAINS
  "forged_shape_2e62_2e62.npy: holds 0 data bytes, but its header (4611686018427387904, 4611686018427387904) of '<u2' needs more than 2^64")
bitexact_cli_test(attention_error_forged_batch_heads_wrap RC 2 ARGS attention
  ${attention_small}/forged_shape_2e32_2e32_1_64.npy ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR ERROR_CONTAINS
  "forged_shape_2e32_2e32_1_64.npy: holds 0 data bytes, but its header (4294967296, 4294967296, 1, 64) of '<u2' needs more than 2^64")
bitexact_cli_test(attention_error_forged_negative_extent RC 2 ARGS attention
  ${attention_small}/forged_shape_negative.npy ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR ERROR_CONTAINS
  "forged_shape_negative.npy: not a .npy file: its header's shape (-1, 64) has an extent that is not an integer from 0 to 10^19 - 1")
bitexact_cli_test(attention_error_truncated RC 2 ARGS attention ${attention_small}/attention_truncated.npy
  ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR ERROR_CONTAINS "attention_truncated.npy: holds 2076 data bytes" "(truncated?)")
bitexact_cli_test(attention_error_not_npy RC 2 ARGS attention ${attention_small}/nul_in_line.in ${n17}/k.npy ${n17}/v.npy
  ONE_LINE_ERROR ERROR_CONTAINS "nul_in_line.in: not a .npy file")
bitexact_cli_test(attention_error_wrong_dtype RC 2 ARGS attention ${attention_small}/attention_int32.npy
  ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR ERROR_CONTAINS "attention_int32.npy: element type '<i4' is not bf16")
bitexact_cli_test(attention_error_float32_not_bf16 RC 2 ARGS attention ${attention_small}/attention_f32_not_bf16.npy
  ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR
  ERROR_CONTAINS "attention_f32_not_bf16.npy: float32 element [1, 3] = 0.10000000149011612 (0x3DCCCCCD) is not a bf16 value")
bitexact_cli_test(attention_error_head_dim RC 2 ARGS attention ${attention_small}/attention_d32.npy
  ${attention_small}/attention_d32.npy ${attention_small}/attention_d32.npy ONE_LINE_ERROR
  ERROR_CONTAINS "head_dim 32 is not described (tiles has 64, 128)")
# K and V agree with Q but not with each other (in N, which Q does not decide): both are named, in either order.
bitexact_cli_test(attention_error_v_shape RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n1000}/v.npy ONE_LINE_ERROR
  ERROR_CONTAINS "split_d64_n17_causal_normal_h1/k.npy [17, 64] and ${n1000}/v.npy [1000, 64]: K and V need the same shape")
bitexact_cli_test(attention_error_k_v_shapes RC 2 ARGS attention ${n17}/q.npy ${n1000}/k.npy ${n17}/v.npy ONE_LINE_ERROR
  ERROR_CONTAINS "split_d64_n1000_full_special_h0/k.npy [1000, 64] and ${n17}/v.npy [17, 64]: K and V need the same shape")
bitexact_cli_test(attention_error_v_head_dim RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy
  ${attention_data}/single_d128_n17_causal_normal_h211/v.npy ONE_LINE_ERROR
  ERROR_CONTAINS "single_d128_n17_causal_normal_h211/v.npy: V has shape [17, 128]; expected K's shape [17, 64]")
# Float64 numbers are not the bits a GPU wrote: the line says to round them (to bf16 for O, to float32 for L).
bitexact_cli_test(attention_error_float64_expect_o RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --expect-o ${attention_small}/attention_f64.npy ONE_LINE_ERROR
  ERROR_CONTAINS "attention_f64.npy: element type '<f8' (float64) is not bf16; round it to bf16 first")
bitexact_cli_test(attention_error_float64_expect_lse RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --expect-lse ${attention_small}/attention_f64.npy ONE_LINE_ERROR
  ERROR_CONTAINS "attention_f64.npy: element type '<f8' (float64) is not float32; round it to float32 first")
# The file named is the one the other two disagree with.
bitexact_cli_test(attention_error_q_head_dim RC 2 ARGS attention
  ${attention_data}/single_d128_n17_causal_normal_h211/q.npy ${n17}/k.npy ${n17}/v.npy ONE_LINE_ERROR
  ERROR_CONTAINS "q.npy: Q has shape [17, 128], but K and V have [17, 64]; Q needs their d")
bitexact_cli_test(attention_error_k_head_dim RC 2 ARGS attention ${n17}/q.npy
  ${attention_data}/single_d128_n17_causal_normal_h211/k.npy ${n17}/v.npy ONE_LINE_ERROR
  ERROR_CONTAINS "k.npy: K has shape [17, 128]; expected [N, 64] to match Q's [17, 64] and V's [17, 64]")
# A folder where a file belongs: one line, not an uncaught stream exception.
bitexact_cli_test(attention_error_expect_folder RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --expect-o ${n17} ONE_LINE_ERROR ERROR_CONTAINS "is a folder, not a .npy file")
bitexact_cli_test(attention_error_q_folder RC 2 ARGS attention ${n17} ${n17}/k.npy ${n17}/v.npy
  ONE_LINE_ERROR ERROR_CONTAINS "is a folder, not a .npy file")
bitexact_cli_test(attention_error_expect_lse_shape RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --expect-lse ${n17}/o.npy ONE_LINE_ERROR ERROR_CONTAINS "o.npy: L has shape [17, 64]; expected [17]")
bitexact_cli_test(attention_error_causal_lengths RC 2 ARGS attention ${n17}/q.npy ${n1000}/k.npy ${n1000}/v.npy --causal
  --preset paper_reference ONE_LINE_ERROR
  ERROR_CONTAINS "--causal needs as many query rows as key rows for preset paper_reference" "Q has 17 and K has 1000")
bitexact_cli_test(attention_error_unknown_preset RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset flash3 ONE_LINE_ERROR ERROR_CONTAINS "unknown preset 'flash3'; the presets are: pytorch_sdpa_flash_sm90")
bitexact_cli_test(attention_error_splits RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy --splits 129
  ONE_LINE_ERROR ERROR_CONTAINS "--splits expects an integer from 1 to 128, not '129'")
bitexact_cli_test(attention_error_batch_heads_too_few RC 2 ARGS attention ${attention_small}/attention_b1h2_q.npy
  ${attention_small}/attention_b1h2_k.npy ${attention_small}/attention_b1h2_v.npy --batch-heads 1,1 ONE_LINE_ERROR
  ERROR_CONTAINS "--batch-heads 1,1 is 1 heads, but Q holds 2")
bitexact_cli_test(attention_error_two_files RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ONE_LINE_ERROR
  ERROR_CONTAINS "expected three .npy files, Q K V, but got 2")
# --- bias mechanism: the paper's P-bar V rounding bias on one constructed row (docs/bias.md) ----
bitexact_cli_test(bias_help ARGS bias mechanism --help CONTAINS "usage: bitexact bias mechanism"
  "the exact sum (rationals) of the same semantics' own")
bitexact_cli_test(bias_help_command ARGS help bias CONTAINS "usage: bitexact bias mechanism" "bitexact bias attribution"
  "bitexact bias statistics")
# 16 ties evenly spaced over 1024 keys: 2 in each 128-key kernel block and 8 in each 512-key paper block,
# so both stabilized passes raise every block's max and no P-bar is 1.
bitexact_cli_test(bias_mechanism_default ARGS bias mechanism --csv ${BITEXACT_CLI_DATA}/bias_mechanism.csv
  --svg ${BITEXACT_CLI_DATA}/bias_mechanism.svg
  CONTAINS "standard   P-bar = 1 at 16 keys" "stabilized P-bar = 1 at 0 keys"
  "paper_reference, standard: the addition with the largest jump"
  "pytorch_sdpa_flash_sm90, standard: the fused step with the largest jump" "fused multiply-add step: 16 products")
# 8 ties, one in each kernel block: the per-block rule never sees two, so all 8 keep P-bar = 1 in the
# kernel's stabilized pass, while each 512-key paper block holds 4 and the paper's rule removes them.
bitexact_cli_test(bias_mechanism_ties_across_blocks ARGS bias mechanism --ties 8 --max -4
  CONTAINS "8 tied at the max -4" "stabilized P-bar = 1 at 8 keys" "stabilized P-bar = 1 at 0 keys")
bitexact_cli_test(bias_error_no_analysis RC 2 ARGS bias ONE_LINE_ERROR ERROR_CONTAINS "expected an analysis")
bitexact_cli_test(bias_error_unknown_analysis RC 2 ARGS bias drift ONE_LINE_ERROR ERROR_CONTAINS "unknown analysis 'drift'")
bitexact_cli_test(bias_error_ties_zero RC 2 ARGS bias mechanism --ties 0 ONE_LINE_ERROR
  ERROR_CONTAINS "--ties expects an integer from 1 to --keys")
bitexact_cli_test(bias_error_tie_twice RC 2 ARGS bias mechanism --tie-positions 5,9,5 ONE_LINE_ERROR
  ERROR_CONTAINS "names a key twice")
bitexact_cli_test(bias_error_tie_outside RC 2 ARGS bias mechanism --keys 64 --tie-positions 64 ONE_LINE_ERROR
  ERROR_CONTAINS "--tie-positions expects distinct keys from 0")
bitexact_cli_test(bias_error_both_tie_options RC 2 ARGS bias mechanism --ties 3 --tie-positions 1,2 ONE_LINE_ERROR
  ERROR_CONTAINS "give one")
bitexact_cli_test(bias_error_max_not_bf16 RC 2 ARGS bias mechanism --max 1.001 ONE_LINE_ERROR
  ERROR_CONTAINS "--max expects a bf16 value" "the nearest bf16 is 1")
bitexact_cli_test(bias_error_gaps RC 2 ARGS bias mechanism --gap-min 9 --gap-max 3 ONE_LINE_ERROR
  ERROR_CONTAINS "--gap-max 3 is below --gap-min 9")
bitexact_cli_test(bias_error_gaps_round_to_nothing RC 2 ARGS bias mechanism --gap-min 0.001 --gap-max 0.002 ONE_LINE_ERROR
  ERROR_CONTAINS "no score below the maximum from the gaps given; widen them (--max 8, --gap-min 0.001, --gap-max 0.002)")
bitexact_cli_test(bias_error_keys RC 2 ARGS bias mechanism --keys 8 ONE_LINE_ERROR
  ERROR_CONTAINS "--keys expects an integer from 16 to 65536")
bitexact_cli_test(bias_error_unknown_option RC 2 ARGS bias mechanism --colour 3 ONE_LINE_ERROR)

# trace --svg: the bit diagram of an addition (the figure itself is checked by
# docs_how_the_gpu_adds against docs/bias/key_addition.svg).
bitexact_cli_test(error_trace_svg_not_an_addition RC 2 ARGS trace mul 1.5 2 --svg ${BITEXACT_CLI_DATA}/never.svg
                  ONE_LINE_ERROR ERROR_CONTAINS "--svg draws an addition's bits; it applies to add and sub only")
bitexact_cli_test(error_trace_svg_zero_sum RC 2 ARGS trace sub 1.5 1.5 --svg ${BITEXACT_CLI_DATA}/never.svg
                  ONE_LINE_ERROR ERROR_CONTAINS "a bit diagram needs two finite nonzero operands and a nonzero sum")
bitexact_cli_test(error_trace_svg_unwritable RC 2 ARGS trace add 1.5 2 --svg /nonexistent/dir/x.svg
                  ONE_LINE_ERROR ERROR_CONTAINS "cannot write '/nonexistent/dir/x.svg'")

# --- bias attribution: the kernel's error split by rounding site (docs/bias.md) --------------------
bitexact_cli_test(bias_attribution_help ARGS bias attribution --help CONTAINS "usage: bitexact bias attribution"
  "leave one out" "95% Student t")
# A small run (128 keys, 3 random rows). The fp32 tables hold the output conversion exact, so its
# contribution is 0 in every row; the stabilized pass's line is there with its beta and eps.
bitexact_cli_test(bias_attribution_small ARGS bias attribution --keys 128 --rows 3 --ties 4
  --csv ${BITEXACT_CLI_DATA}/bias_attribution.csv --svg ${BITEXACT_CLI_DATA}/bias_attribution.svg
  CONTAINS "the mechanism row (128 keys, 4 tied at the max 8" "and 3 random rows" "beta 2, eps 0.001"
  "standard pass, fp32 (before the bf16 conversion) O:" "stabilized pass, bf16 (the kernel's) O:"
  "  output_bf16                 +0          +0   +0 [+0, +0]")
bitexact_cli_test(bias_attribution_error_head_dim RC 2 ARGS bias attribution --head-dim 96 ONE_LINE_ERROR
  ERROR_CONTAINS "--head-dim expects 64 or 128")
bitexact_cli_test(bias_attribution_error_rows RC 2 ARGS bias attribution --rows -1 ONE_LINE_ERROR
  ERROR_CONTAINS "--rows expects an integer from 0 to 100000")
bitexact_cli_test(bias_attribution_error_ties RC 2 ARGS bias attribution --keys 64 --ties 65 ONE_LINE_ERROR
  ERROR_CONTAINS "--ties 65 exceeds --keys 64")
bitexact_cli_test(bias_attribution_error_beta RC 2 ARGS bias attribution --beta 1.0001 ONE_LINE_ERROR
  ERROR_CONTAINS "--beta expects a positive fp32 value")
bitexact_cli_test(bias_attribution_error_unknown_option RC 2 ARGS bias attribution --cols 3 ONE_LINE_ERROR)
bitexact_cli_test(bias_attribution_error_argument RC 2 ARGS bias attribution rows ONE_LINE_ERROR
  ERROR_CONTAINS "unexpected argument 'rows'")

# --- bias statistics: mean signed error of O and delta over synthetic heads, standard vs stabilized ----
bitexact_cli_test(bias_statistics_help ARGS bias statistics --help CONTAINS "usage: bitexact bias statistics"
  "The independent unit (units) is a tie group of a head")
# One cell per placement, 8 ties in a head of 512 keys (4 blocks of 128), negative maxima -[4, 32): the
# standard kernel has P-bar = 1 at every tie (8 a row, plus the running max of blocks taken before the
# ties' block); the per-block rule removes them in one_block and sink, and leaves them across blocks only
# where a block holds a single tie (here every block holds 2: none left).
bitexact_cli_test(bias_statistics_small ARGS bias statistics --maxima negative --ties 8 --v-means -1 --heads 2
  --rows 16 --threads 2 --csv ${BITEXACT_CLI_DATA}/bias_statistics.csv --svg ${BITEXACT_CLI_DATA}/bias_statistics.svg
  CONTAINS " 64   512 negative           one_block        8   -1     32    32 |"
  " 64   512 negative           sink             8   -1     32     2 |")
# --backward: each kernel's O and L through the flash backward model, against the exact gradients.
bitexact_cli_test(bias_statistics_backward ARGS bias statistics --maxima small_positive --placements one_block
  --ties 64 --v-means -1 --betas 2 --heads 4 --rows 8 --threads 2 --backward
  --csv ${BITEXACT_CLI_DATA}/bias_statistics_backward.csv
  CONTAINS "backward (PyTorch's flash backward on each kernel's O and L, against the exact gradients)"
  "64   512 small_positive     one_block       64   -1 | -2.7e-03±8e-03 +1.1e-05±3e-05 -8.8e-06±4e-05 +2.2e-06±6e-06 | +9.8e-03±1e-02 -3.8e-05±5e-05 +6.2e-05±5e-05 +2.2e-06±6e-06")
bitexact_cli_test(bias_statistics_error_ties RC 2 ARGS bias statistics --ties 0,4 ONE_LINE_ERROR
  ERROR_CONTAINS "--ties expects integers from 1 to 64, not '0'")
bitexact_cli_test(bias_statistics_error_keys RC 2 ARGS bias statistics --keys 500 ONE_LINE_ERROR
  ERROR_CONTAINS "--keys expects multiples of 128 from 128 to 4096, not '500'")
bitexact_cli_test(bias_statistics_error_head_dim RC 2 ARGS bias statistics --head-dims 96 ONE_LINE_ERROR
  ERROR_CONTAINS "--head-dims expects 64 and/or 128")
bitexact_cli_test(bias_statistics_error_placement RC 2 ARGS bias statistics --placements one_block,middle ONE_LINE_ERROR
  ERROR_CONTAINS "--placements expects one_block, across_blocks, sink, not 'middle'")
bitexact_cli_test(bias_statistics_error_v_mean RC 2 ARGS bias statistics --v-means 0.25 ONE_LINE_ERROR
  ERROR_CONTAINS "--v-means expects values among -1, -0.5, 0, 0.5, 1")
bitexact_cli_test(bias_statistics_error_beta RC 2 ARGS bias statistics --betas 1 ONE_LINE_ERROR
  ERROR_CONTAINS "--betas expects decimals above 1")
bitexact_cli_test(bias_statistics_error_repeated RC 2 ARGS bias statistics --ties 2,2 ONE_LINE_ERROR
  ERROR_CONTAINS "--ties names '2' twice")
bitexact_cli_test(bias_statistics_error_ties_beyond_block RC 2 ARGS bias statistics --head-dims 128 --ties 65
  ONE_LINE_ERROR ERROR_CONTAINS "--ties expects integers from 1 to 64")
bitexact_cli_test(bias_statistics_error_save_heads RC 2 ARGS bias statistics --keys 128,256 --save-heads x
  ONE_LINE_ERROR ERROR_CONTAINS "--save-heads needs one --head-dims and one --keys value")
bitexact_cli_test(bias_statistics_error_argument RC 2 ARGS bias statistics extra ONE_LINE_ERROR
  ERROR_CONTAINS "unexpected argument 'extra'")

# Kernels as descriptions: the registry's list and JSON, a description file, and the refusals.
set(triton_head ${CMAKE_CURRENT_LIST_DIR}/data/attention_backends/d64_n512_causal_ties_positive_h3)
set(triton_example ${CMAKE_CURRENT_LIST_DIR}/../examples/triton/flash_forward.json)
bitexact_cli_test(attention_list_kernels ARGS attention --list-kernels
  CONTAINS "pytorch_sdpa_flash_sm90 " "flex_attention_sm90 " "paper_reference_fp64 ")
bitexact_cli_test(attention_print_kernel ARGS attention --print-kernel flex_attention_sm90
  CONTAINS "\"block_order\": \"mask_partial_then_full\"" "\"normalization\": \"div.full.f32\"")
# cuDNN's fp8 SDPA forward on a committed head (tests/data/attention_fp8): uint8 files, the six scales.
set(fp8_head ${CMAKE_CURRENT_LIST_DIR}/data/attention_fp8/d128_full_n256_h0_rows192-255)
set(fp8_files ${fp8_head}/q.npy ${fp8_head}/k.npy ${fp8_head}/v.npy)
set(fp8_scales --descale-q 0.01138929184526205 --descale-k 0.009992506355047226 --descale-v 0.011413934640586376
    --descale-s 0.0022321429569274187 --scale-s 448 --scale-o 87.6122055053711)
bitexact_cli_test(attention_fp8_agrees ARGS attention ${fp8_files} --preset cudnn_sdpa_fp8_sm90 ${fp8_scales}
  --expect-o ${fp8_head}/o.npy --expect-lse ${fp8_head}/stats.npy
  CONTAINS "preset cudnn_sdpa_fp8_sm90: 1 split (no split-KV path), tiles 64 rows x 256 keys, 1 K/V block"
           "scale_s 448, scale_o 87.612206 (O e4m3)" "O: 8192 elements compared, 0 mismatches"
           "L: 64 elements compared, 0 mismatches")
bitexact_cli_test(attention_fp8_error_zero_descale RC 2 ARGS attention ${fp8_files} --preset cudnn_sdpa_fp8_sm90
  --descale-q 0 ONE_LINE_ERROR ERROR_CONTAINS "attention: --descale-q 0 is not a positive finite number")
bitexact_cli_test(attention_fp8_error_scale_to_bf16 RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --scale-s 448 ONE_LINE_ERROR
  ERROR_CONTAINS "attention: --scale-s is a scale of fp8 kernels; pytorch_sdpa_flash_sm90 takes bf16 Q, K and V")
bitexact_cli_test(attention_fp8_error_bf16_files RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset cudnn_sdpa_fp8_sm90 ONE_LINE_ERROR
  ERROR_CONTAINS "holds bf16, but cudnn_sdpa_fp8_sm90 takes e4m3 Q, K and V as uint8 bit patterns")
bitexact_cli_test(attention_fp8_error_fp8_files_to_bf16 RC 2 ARGS attention ${fp8_files} ONE_LINE_ERROR
  ERROR_CONTAINS "uint8 elements are fp8 bit patterns, but pytorch_sdpa_flash_sm90 takes bf16 Q, K and V")
bitexact_cli_test(attention_fp8_error_explain RC 2 ARGS attention ${fp8_files} --preset cudnn_sdpa_fp8_sm90
  --explain 0,0 ONE_LINE_ERROR
  ERROR_CONTAINS "attention: --explain traces FA2's arithmetic, bf16 or its fp8 recipe (pytorch_sdpa_flash_sm90"
                 "bitexact_flash_fp8_sm90, bitexact_flash_fp8_sm90_stabilized" "not cudnn_sdpa_fp8_sm90's")
# FA2's fp8 recipe (bitexact's FP8 kernel) on the same uint8 files: its tiles, no split-KV path, a bf16 O;
# an e4m3 O file is refused for it (python/tests/test_attention_fp8_flash.py compares its bf16 O files).
bitexact_cli_test(attention_fp8_flash_runs ARGS attention ${fp8_files} --preset bitexact_flash_fp8_sm90 ${fp8_scales}
  CONTAINS "preset bitexact_flash_fp8_sm90: 1 split (no split-KV path), tiles 128 rows x 128 keys, 2 K/V blocks"
           "e4m3 Q, K and V;" "scale_s 448, scale_o 87.612206 (O bf16)")
# A capture of the kernel (tests/data/flash_fp8, an H200): uint8 Q, K, V, the six scales, O as uint16 bf16
# patterns and L as float32, every bit.
set(flash_fp8_head ${CMAKE_CURRENT_LIST_DIR}/data/flash_fp8/d128_n256_full_rule0_n256_h0_rows0-127)
bitexact_cli_test(attention_fp8_flash_agrees ARGS attention ${flash_fp8_head}/q.npy ${flash_fp8_head}/k.npy
  ${flash_fp8_head}/v.npy --preset bitexact_flash_fp8_sm90 --descale-q 0.009786330163478851
  --descale-k 0.009310521185398102 --descale-v 0.011386387050151825 --descale-s 0.00390625 --scale-s 256
  --expect-o ${flash_fp8_head}/o.npy --expect-lse ${flash_fp8_head}/stats.npy
  CONTAINS "O: 16384 elements compared, 0 mismatches" "L: 128 elements compared, 0 mismatches")
# --explain on the FP8 kernel: row 5 of a stabilized ties head, its e4m3 P-bar counted per block and O[5, 17]'s
# 32-product steps on the fp8 tensor core, the GPU's bits (the first mismatch of O would be explained the same way).
set(flash_fp8_ties ${CMAKE_CURRENT_LIST_DIR}/data/flash_fp8/d64_n1000_full_rule1_ties_n1000_h0_rows0-63)
bitexact_cli_test(attention_fp8_flash_explain ARGS attention ${flash_fp8_ties}/q.npy ${flash_fp8_ties}/k.npy
  ${flash_fp8_ties}/v.npy --preset bitexact_flash_fp8_sm90_stabilized --descale-q 0.018720735 --descale-k 0.010690597
  --descale-v 0.01017301 --descale-s 0.00390625 --scale-s 256 --expect-o ${flash_fp8_ties}/o.npy --explain 5,17
  CONTAINS "O: 4096 elements compared, 0 mismatches"
           "block 5, keys 640..767: max 211328, running max 211328, alpha 0.8375115, P = 1 at 1 key, P-bar = e4m3(scale_s) = 0x78 (256) at 1"
           "end: row sum 0x370C5F9D (8.366912e-06), RN(RN(1/sum) * o_scale) 0x4097FB95 (4.7494607)"
           "the 41 roundings of O[17]" "       36     0     0 0..31         tensor-core step fp32:0x3C9B1400"
           "fused multiply-add step: 32 products + C -> fp32" "41                           cvt to bf16      bf16:0x3DB8 (0.08984375)"
           "lies among them")
# The first mismatch of O explained on an fp8 kernel: the standard preset against the stabilized kernel's O of
# the same ties head (the beta rule emptied block 0 there), its row and the conversion window.
bitexact_cli_test(attention_fp8_flash_mismatch_explained RC 1 ARGS attention ${flash_fp8_ties}/q.npy
  ${flash_fp8_ties}/k.npy ${flash_fp8_ties}/v.npy --preset bitexact_flash_fp8_sm90 --descale-q 0.018720735
  --descale-k 0.010690597 --descale-v 0.01017301 --descale-s 0.00390625 --scale-s 256 --expect-o ${flash_fp8_ties}/o.npy
  CONTAINS "O: 4096 elements compared, 4026 mismatches" "first mismatch in O at [0, 0] (row, col)"
           "O[0, 0] (row, col) = 0x3E63 (0.2216796875), as the model computed it"
           "P-bar = e4m3(scale_s) = 0x78 (256) at 2"
           "the file's bf16 value is what float32 values from 0.037475586 to 0.037719727 convert to")
# --compare on two FP8 presets: the pv_fp32_add variant against the standard one, on its own capture's head.
set(flash_fp8_pv ${CMAKE_CURRENT_LIST_DIR}/data/flash_fp8/d128_n1000_full_rule0_pv_fp32_add_n1000_h0_rows0-31)
bitexact_cli_test(attention_fp8_compare_pv_fp32_add RC 1 ARGS attention ${flash_fp8_pv}/q.npy ${flash_fp8_pv}/k.npy
  ${flash_fp8_pv}/v.npy --compare bitexact_flash_fp8_sm90 bitexact_flash_fp8_sm90_pv_fp32_add --descale-q 0.010119493
  --descale-k 0.009893897 --descale-v 0.010670937 --descale-s 0.00390625 --scale-s 256
  CONTAINS "O: 4096 elements, 2992 differ" "B above A: 2992, below: 0" "L: 32 elements, 0 differ"
           "where they part: in the unnormalised O (P, its rescaling or the P V steps); the row sums agree"
           "every key's P enters P V as the same e4m3 P-bar in both kernels")
# The p_bar_sum variant's capture (descale_s 1/64, scale_o 2): its O and L, and an element explained with the
# row sums of P-bar, descaled at the end; --compare against pv_fp32_add parts at the row sum.
set(flash_fp8_p_bar_sum ${CMAKE_CURRENT_LIST_DIR}/data/flash_fp8/d64_n1000_full_rule0_scale_o_2_pv_fp32_add_p_bar_sum_n1000_h0_rows0-31)
set(flash_fp8_p_bar_sum_scales --descale-q 0.009282697923481464 --descale-k 0.00968669168651104
  --descale-v 0.01133004855364561 --descale-s 0.015625 --scale-s 256 --scale-o 2)
bitexact_cli_test(attention_fp8_p_bar_sum_explain ARGS attention ${flash_fp8_p_bar_sum}/q.npy ${flash_fp8_p_bar_sum}/k.npy
  ${flash_fp8_p_bar_sum}/v.npy --preset bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum ${flash_fp8_p_bar_sum_scales}
  --expect-o ${flash_fp8_p_bar_sum}/o.npy --expect-lse ${flash_fp8_p_bar_sum}/stats.npy --explain 3,5
  CONTAINS "O: 2048 elements compared, 0 mismatches" "L: 32 elements compared, 0 mismatches"
           "row sums of P-bar 1268.5 653.75 637.25 775.875" "end: row sum (times descale_s)")
bitexact_cli_test(attention_fp8_compare_p_bar_sum RC 1 ARGS attention ${flash_fp8_p_bar_sum}/q.npy
  ${flash_fp8_p_bar_sum}/k.npy ${flash_fp8_p_bar_sum}/v.npy --compare bitexact_flash_fp8_sm90_pv_fp32_add
  bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum ${flash_fp8_p_bar_sum_scales}
  CONTAINS "O: 2048 elements, 2048 differ" "where they part: already in the row sum (one kernel sums the fp32 P, the other the e4m3 P-bar)")
bitexact_cli_test(attention_fp8_compare_cudnn_refused RC 2 ARGS attention ${fp8_files} --compare cudnn_sdpa_fp8_sm90
  bitexact_flash_fp8_sm90 ${fp8_scales} ONE_LINE_ERROR
  ERROR_CONTAINS "--compare follows kernels that write bf16 O; cudnn_sdpa_fp8_sm90 writes e4m3")
bitexact_cli_test(attention_fp8_flash_error_e4m3_o_file RC 2 ARGS attention ${fp8_files} --preset bitexact_flash_fp8_sm90
  --expect-o ${fp8_head}/o.npy ONE_LINE_ERROR
  ERROR_CONTAINS "is one byte, but bitexact_flash_fp8_sm90's O is bf16: compare uint16 or int16 bf16 bit patterns")
bitexact_cli_test(attention_fp8_flash_error_splits RC 2 ARGS attention ${fp8_files} --preset bitexact_flash_fp8_sm90
  --splits 2 ONE_LINE_ERROR ERROR_CONTAINS "kernel bitexact_flash_fp8_sm90 has no split-KV path (split is none)")
bitexact_cli_test(attention_error_print_unknown_kernel RC 2 ARGS attention --print-kernel flash ONE_LINE_ERROR
  ERROR_CONTAINS "unknown preset 'flash'; the presets are: pytorch_sdpa_flash_sm90")
bitexact_cli_test(attention_flex ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy ${triton_head}/v.npy --causal
  --preset flex_attention_sm90 --expect-o ${triton_head}/o_flex.npy --expect-lse ${triton_head}/lse_flex.npy
  CONTAINS "preset flex_attention_sm90: 1 split (no split-KV path), tiles 128 rows x 128 keys"
  "O: 32768 elements compared, 0 mismatches" "L: 512 elements compared, 0 mismatches")
bitexact_cli_test(attention_kernel_file ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy ${triton_head}/v.npy
  --causal --kernel ${triton_example} --expect-o ${triton_head}/o_triton_example.npy
  --expect-lse ${triton_head}/lse_triton_example.npy
  CONTAINS "preset triton_flash_forward_example: 1 split (no split-KV path), tiles 128 rows x 64 keys"
  "O: 32768 elements compared, 0 mismatches" "L: 512 elements compared, 0 mismatches")
bitexact_cli_test(attention_kernel_file_against_flex RC 1 ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy
  ${triton_head}/v.npy --causal --kernel ${triton_example} --expect-o ${triton_head}/o_flex.npy
  CONTAINS "O: 32768 elements compared, " "first mismatch in O at")
bitexact_cli_test(attention_error_bad_kernel_file RC 2 ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy
  ${triton_head}/v.npy --kernel ${CMAKE_CURRENT_LIST_DIR}/cli/kernel_unknown_field.json ONE_LINE_ERROR
  ERROR_CONTAINS "kernel description: field 'warps': unknown field")
# The memory-efficient backend's L, padded from 300 to 320 rows of +inf: the first 300 compared, the padding checked.
set(efficient_head ${CMAKE_CURRENT_LIST_DIR}/data/attention_backends/d128_q300_k1000_causal_normal_h0)
bitexact_cli_test(attention_efficient_padded_lse ARGS attention ${efficient_head}/q.npy ${efficient_head}/k.npy
  ${efficient_head}/v.npy --causal --preset pytorch_sdpa_efficient_sm90 --expect-lse ${efficient_head}/lse_efficient.npy
  CONTAINS "L: the file's rows 300 to 319 of each head are padding (+inf), not compared\nL: 300 elements compared, 0 mismatches")
bitexact_cli_test(attention_error_padded_lse_holds_a_value RC 2 ARGS attention ${efficient_head}/q.npy
  ${efficient_head}/k.npy ${efficient_head}/v.npy --causal --preset pytorch_sdpa_efficient_sm90
  --expect-lse ${attention_small}/lse_efficient_padding_not_inf.npy ONE_LINE_ERROR
  ERROR_CONTAINS "lse_efficient_padding_not_inf.npy: L's padding row 305 holds 1 (0x3F800000), not +inf; rows 300 to 319 must be the backend's padding")
# A .npy file given as --kernel: said so, not the parser's quote of its first byte (0x93).
bitexact_cli_test(attention_error_kernel_is_npy RC 2 ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy
  ${triton_head}/v.npy --kernel ${triton_head}/q.npy ONE_LINE_ERROR
  ERROR_CONTAINS "kernel description: not JSON: a NumPy .npy file, not a description")
bitexact_cli_test(attention_error_preset_and_kernel RC 2 ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy
  ${triton_head}/v.npy --preset flex_attention_sm90 --kernel ${triton_example} ONE_LINE_ERROR
  ERROR_CONTAINS "--preset and --kernel both name the kernel")
bitexact_cli_test(attention_error_flex_short RC 2 ARGS attention ${n17}/q.npy ${n17}/k.npy ${n17}/v.npy
  --preset flex_attention_sm90 ONE_LINE_ERROR ERROR_CONTAINS "is described for 128 query rows or more, not 17")
bitexact_cli_test(attention_error_flex_explain RC 2 ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy
  ${triton_head}/v.npy --preset flex_attention_sm90 --explain 1,1 ONE_LINE_ERROR
  ERROR_CONTAINS "--explain traces FA2's arithmetic")
bitexact_cli_test(attention_efficient ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy ${triton_head}/v.npy
  --causal --preset pytorch_sdpa_efficient_sm90 --expect-o ${triton_head}/o_efficient.npy
  CONTAINS "preset pytorch_sdpa_efficient_sm90: 1 split (no split-KV path), tiles 64 rows x 64 keys"
  "O: 32768 elements compared, 0 mismatches")
# Why two kernels disagree: --compare A B.
set(backends_causal ${CMAKE_CURRENT_LIST_DIR}/data/attention_backends/d64_n1000_causal_normal_h0)
bitexact_cli_test(attention_compare_same ARGS attention ${backends_causal}/q.npy ${backends_causal}/k.npy
  ${backends_causal}/v.npy --causal --compare flex_attention_sm90 flex_attention_sm90
  CONTAINS "O: 64000 elements, 0 differ (0.0000%)" "L: 1000 elements, 0 differ (0.0000%)")
bitexact_cli_test(attention_compare_flash_flex RC 1 ARGS attention ${backends_causal}/q.npy ${backends_causal}/k.npy
  ${backends_causal}/v.npy --causal --batch-heads 1,64 --compare pytorch_sdpa_flash_sm90 flex_attention_sm90
  CONTAINS "O: 64000 elements, 18487 differ (28.8859%)" "first differing element of O: [256, 1] (row, col)"
  "A visited K/V blocks 2 1 0" "B visited K/V blocks 2 0 1"
  "where they part: in the unnormalised O (P, its rescaling or the P V steps); the row sums agree")
bitexact_cli_test(attention_compare_units RC 1 ARGS attention ${backends_causal}/q.npy ${backends_causal}/k.npy
  ${backends_causal}/v.npy --causal --compare pytorch_sdpa_efficient_sm90 ${triton_example}
  CONTAINS "O: 64000 elements, 14 differ (0.0219%)" "distance in bf16 ulps 1: 14"
  "L: not compared, one kernel writes it in natural-log units and the other in base 2")
bitexact_cli_test(attention_error_compare_paper RC 2 ARGS attention ${backends_causal}/q.npy ${backends_causal}/k.npy
  ${backends_causal}/v.npy --compare paper_reference flex_attention_sm90 ONE_LINE_ERROR
  ERROR_CONTAINS "--compare takes GPU kernels (presets or .json descriptions), not paper_reference")
bitexact_cli_test(attention_error_compare_expect RC 2 ARGS attention ${backends_causal}/q.npy ${backends_causal}/k.npy
  ${backends_causal}/v.npy --compare flex_attention_sm90 pytorch_sdpa_efficient_sm90 --expect-o ${backends_causal}/o_flex.npy
  ONE_LINE_ERROR ERROR_CONTAINS "--compare A B computes two kernels and compares them")
bitexact_cli_test(attention_cudnn ARGS attention ${triton_head}/q.npy ${triton_head}/k.npy ${triton_head}/v.npy
  --causal --preset pytorch_sdpa_cudnn_sm90 --expect-o ${triton_head}/o_cudnn.npy --expect-lse ${triton_head}/lse_cudnn.npy
  CONTAINS "preset pytorch_sdpa_cudnn_sm90: 1 split (no split-KV path), tiles 64 rows x 128 keys"
  "O: 32768 elements compared, 0 mismatches" "L: 512 elements compared, 0 mismatches")
# A bottom-right causal mask with fewer queries than keys: FlexAttention (through its block mask) and the example.
set(causal_300 ${CMAKE_CURRENT_LIST_DIR}/data/attention_backends/d128_q300_k1000_causal_normal_h0)
bitexact_cli_test(attention_flex_causal_300_1000 ARGS attention ${causal_300}/q.npy ${causal_300}/k.npy ${causal_300}/v.npy
  --causal --preset flex_attention_sm90 --expect-o ${causal_300}/o_flex.npy --expect-lse ${causal_300}/lse_flex.npy
  CONTAINS "Q [300, 128], K and V [1000, 128], causal" "O: 38400 elements compared, 0 mismatches"
  "L: 300 elements compared, 0 mismatches")
# SDPA's is_causal with N_q != N_k, top-left: the memory-efficient and cuDNN backends.
bitexact_cli_test(attention_efficient_causal_300_1000 ARGS attention ${causal_300}/q.npy ${causal_300}/k.npy
  ${causal_300}/v.npy --causal --preset pytorch_sdpa_efficient_sm90 --expect-o ${causal_300}/o_efficient.npy
  CONTAINS "O: 38400 elements compared, 0 mismatches")  # its L has 320 rows, padded (the replay test reads it)
set(causal_1000_300 ${CMAKE_CURRENT_LIST_DIR}/data/attention_backends/d64_q1000_k300_causal_normal_h1)
bitexact_cli_test(attention_cudnn_causal_1000_300 ARGS attention ${causal_1000_300}/q.npy ${causal_1000_300}/k.npy
  ${causal_1000_300}/v.npy --causal --preset pytorch_sdpa_cudnn_sm90 --expect-o ${causal_1000_300}/o_cudnn.npy
  --expect-lse ${causal_1000_300}/lse_cudnn.npy
  CONTAINS "Q [1000, 64], K and V [300, 64], causal" "O: 64000 elements compared, 0 mismatches"
  "L: 1000 elements compared, 0 mismatches")
# One query row: cuDNN runs its sm80 kernel, which no description models.
set(n17 ${CMAKE_CURRENT_LIST_DIR}/data/attention/split_d64_n17_causal_normal_h1)
bitexact_cli_test(attention_error_cudnn_one_row RC 2 ARGS attention ${CMAKE_CURRENT_LIST_DIR}/cli/attention_one_row_q.npy
  ${n17}/k.npy ${n17}/v.npy --preset pytorch_sdpa_cudnn_sm90 ONE_LINE_ERROR
  ERROR_CONTAINS "described for 2 query rows or more")

# The backward pass (--backward): PyTorch's flash backward on captured heads (tests/data/attention_backward).
set(bwd ${CMAKE_CURRENT_LIST_DIR}/data/attention_backward/d128_n512_causal_ties_positive_h3)
bitexact_cli_test(attention_backward_ties ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy --causal
  --batch-heads 1,4 --backward ${bwd}/do.npy --forward-o ${bwd}/o.npy --forward-lse ${bwd}/lse.npy
  --expect-dq ${bwd}/dq.npy --expect-dk ${bwd}/dk.npy --expect-dv ${bwd}/dv.npy
  CONTAINS "tiles 64 query rows x 128 keys; O and L from the files; dQ in the deterministic order, 33 buffers"
  "dQ: 65536 elements compared, 0 mismatches" "dK: 65536 elements compared, 0 mismatches"
  "dV: 65536 elements compared, 0 mismatches")
# The same on one thread: the key blocks of each dQ buffer in order, whatever the count.
bitexact_cli_test(attention_backward_one_thread ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy --causal
  --batch-heads 1,4 --backward ${bwd}/do.npy --forward-o ${bwd}/o.npy --forward-lse ${bwd}/lse.npy
  --expect-dq ${bwd}/dq.npy --expect-dk ${bwd}/dk.npy --expect-dv ${bwd}/dv.npy --threads 1 QUIET_STDERR
  CONTAINS "dQ: 65536 elements compared, 0 mismatches" "dK: 65536 elements compared, 0 mismatches"
  "dV: 65536 elements compared, 0 mismatches")
# O and L computed by the forward preset: the same gradients.
bitexact_cli_test(attention_backward_forward_computed ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy --causal
  --batch-heads 1,4 --backward ${bwd}/do.npy --expect-dk ${bwd}/dk.npy --expect-dv ${bwd}/dv.npy
  CONTAINS "O and L partly computed by pytorch_sdpa_flash_sm90" "dK: 65536 elements compared, 0 mismatches"
  "dV: 65536 elements compared, 0 mismatches")
# The call's B and H left out: dQ's additions dealt to 132 buffers instead of 17.
set(bwd4096 ${CMAKE_CURRENT_LIST_DIR}/data/attention_backward/d64_n4096_full_normal_h0)
bitexact_cli_test(attention_backward_wrong_buffers RC 1 ARGS attention ${bwd4096}/q.npy ${bwd4096}/k.npy ${bwd4096}/v.npy
  --backward ${bwd4096}/do.npy --forward-o ${bwd4096}/o.npy --forward-lse ${bwd4096}/lse.npy
  --expect-dq ${bwd4096}/dq.npy
  CONTAINS "132 buffers (B 1, H 1, h100_sxm: 132 SMs)" "dQ: 262144 elements compared, 40 mismatches"
  "first mismatch in dQ at [3, 56] (row, col)" "the count is ceil(SMs / (B H))")
# On an H100 PCIe the same call deals dQ to 114 buffers.
bitexact_cli_test(attention_backward_gpu_buffers RC 1 ARGS attention ${bwd4096}/q.npy ${bwd4096}/k.npy ${bwd4096}/v.npy
  --backward ${bwd4096}/do.npy --forward-o ${bwd4096}/o.npy --forward-lse ${bwd4096}/lse.npy
  --expect-dq ${bwd4096}/dq.npy --gpu h100_pcie CONTAINS "114 buffers (B 1, H 1, h100_pcie: 114 SMs)")
bitexact_cli_test(attention_error_backward_files_alone RC 2 ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy
  --expect-dq ${bwd}/dq.npy ONE_LINE_ERROR ERROR_CONTAINS "belong to the backward pass; give --backward DO.npy")
bitexact_cli_test(attention_error_backward_other_kernel RC 2 ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy
  --backward ${bwd}/do.npy --preset flex_attention_sm90 ONE_LINE_ERROR
  ERROR_CONTAINS "--backward models PyTorch's flash backward on the pytorch_sdpa_flash_sm90 forward")
bitexact_cli_test(attention_error_backward_do_shape RC 2 ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy
  --backward ${bwd4096}/do.npy ONE_LINE_ERROR ERROR_CONTAINS "dO has shape [4096, 64]; expected Q's shape [512, 128]")
bitexact_cli_test(attention_error_backward_lse_shape RC 2 ARGS attention ${bwd}/q.npy ${bwd}/k.npy ${bwd}/v.npy
  --backward ${bwd}/do.npy --forward-lse ${bwd}/dq.npy ONE_LINE_ERROR ERROR_CONTAINS "L has shape [512, 128]; expected [512]")
# A file off by an ulp or a few in many elements, both ways (here FlexAttention's O against the flash
# preset): the mismatches' distances, and that the file looks like another rounding, not this kernel's.
set(flex_head ${CMAKE_CURRENT_LIST_DIR}/data/attention_backends/d64_n1000_causal_normal_h0)
bitexact_cli_test(attention_mismatch_distribution RC 1 ARGS attention ${flex_head}/q.npy ${flex_head}/k.npy
  ${flex_head}/v.npy --causal --batch-heads 1,64 --expect-o ${flex_head}/o_flex.npy
  CONTAINS "  distance in bf16 ulps 1: " "; the model above the file: "
  "nearly all by 1 to 4 ulps either way: the file looks like another rounding of the same result")

# bitexact matmul on cuBLAS's captured products (tests/data/matmul, an H200 under torch 2.11).
set(matmul_data ${CMAKE_CURRENT_LIST_DIR}/data/matmul)
set(mm_split ${matmul_data}/bf16_splitk_96x200x3000)
bitexact_cli_test(matmul_split_k ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --splits 2 --expect ${mm_split}/d.npy
  CONTAINS "matmul: A [16, 3000] bf16, B [3000, 16] bf16 -> bf16, kernel cublas_sm90" "2 splits of K" "D: 256 elements compared, 0 mismatches")
bitexact_cli_test(matmul_one_chain_misses_the_splits RC 1 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy
  --expect ${mm_split}/d.npy CONTAINS "D: 256 elements compared, 17 mismatches"
  "distance in bf16 ulps 1: 17; the model above the file: 0, below: 17" "first mismatch at [0, 0] (row, col)"
  "file  0x4821 (164864)" "model 0x4820 (163840)")
bitexact_cli_test(matmul_identify ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --expect ${mm_split}/d.npy --identify
  CONTAINS "every bit of" "(256 elements), of 128 candidates (2 descriptions x split counts 1 to 64)" "cublas_sm90, --splits 2"
  "triton_matmul_sm90, --splits 2")
set(mm_tf32 ${matmul_data}/fp32_tf32_96x200x2000_mixed)
bitexact_cli_test(matmul_tf32_ragged_k ARGS matmul ${mm_tf32}/a.npy ${mm_tf32}/b.npy --in-format fp32 --splits 8
  --expect ${mm_tf32}/d.npy CONTAINS "fp32 -> fp32, kernel cublas_sm90_tf32" "D: 256 elements compared, 0 mismatches")
bitexact_cli_test(matmul_tf32_truncated_misses RC 1 ARGS matmul ${mm_tf32}/a.npy ${mm_tf32}/b.npy --in-format fp32
  --splits 8 --preset triton_matmul_sm90_tf32 --expect ${mm_tf32}/d.npy CONTAINS "operands read as tf32")
bitexact_cli_test(matmul_error_tf32_into_bf16 RC 2 ARGS matmul ${mm_tf32}/a.npy ${mm_tf32}/b.npy --in-format fp32
  --out-format bf16 ONE_LINE_ERROR ERROR_CONTAINS "a fp32 product writes fp32, not bf16")
set(mm_linear ${matmul_data}/bf16_linear_64x64x8192)
bitexact_cli_test(matmul_bias_split_k ARGS matmul ${mm_linear}/a.npy ${mm_linear}/b.npy --bias ${mm_linear}/bias.npy
  --splits 6 --expect ${mm_linear}/d.npy CONTAINS ", bias -> bf16" "D: 64 elements compared, 0 mismatches")
set(mm_fp16 ${matmul_data}/fp16_splitk_64x64x8192)
bitexact_cli_test(matmul_fp16 ARGS matmul ${mm_fp16}/a.npy ${mm_fp16}/b.npy --in-format fp16 --splits 6
  --expect ${mm_fp16}/d.npy CONTAINS "fp16" "D: 64 elements compared, 0 mismatches")
bitexact_cli_test(matmul_help ARGS matmul --help CONTAINS "usage: bitexact matmul A.npy B.npy" "--identify")
bitexact_cli_test(matmul_error_k RC 2 ARGS matmul ${mm_split}/a.npy ${mm_linear}/b.npy ONE_LINE_ERROR
  ERROR_CONTAINS "B has shape [8192, 8], but A [16, 3000] has K = 3000; B needs K rows")
bitexact_cli_test(matmul_error_identify_alone RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --identify
  ONE_LINE_ERROR ERROR_CONTAINS "--identify needs --expect FILE")
bitexact_cli_test(matmul_error_float_file RC 2 ARGS matmul ${mm_split}/a.npy ${matmul_data}/fp8_e4m3_fp32_fast_64x64x2048/d.npy
  ONE_LINE_ERROR ERROR_CONTAINS "element type '<u4' does not hold bf16 bit patterns")
bitexact_cli_test(matmul_error_one_file RC 2 ARGS matmul ${mm_split}/a.npy ONE_LINE_ERROR
  ERROR_CONTAINS "expected two .npy files, A and B, but got 1")
# fp8 products (torch._scaled_mm): row-wise scales with promotion; fast accumulation into fp32; e5m2 x e4m3.
set(mm_rowwise ${matmul_data}/fp8_e4m3_bf16_rowwise_default_128x256x1024)
bitexact_cli_test(matmul_fp8_rowwise ARGS matmul ${mm_rowwise}/a.npy ${mm_rowwise}/b.npy --in-format e4m3
  --scale-a ${mm_rowwise}/scale_a.npy --scale-b ${mm_rowwise}/scale_b.npy --expect ${mm_rowwise}/d.npy
  CONTAINS "scales per row x per column -> bf16" "chains over each 128 of K added into fp32" "D: 32768 elements compared, 0 mismatches")
set(mm_fast ${matmul_data}/fp8_e4m3_fp32_fast_64x64x2048)
bitexact_cli_test(matmul_fp8_fast_accum ARGS matmul ${mm_fast}/a.npy ${mm_fast}/b.npy --in-format e4m3 --scale-a 0.3
  --scale-b 1.7 --preset cublas_sm90_fp8_fast_accum --out-format fp32 --expect ${mm_fast}/d.npy
  CONTAINS "one chain over each split" "D: 4096 elements compared, 0 mismatches")
bitexact_cli_test(matmul_fp8_promotion_is_not_fast_accum RC 1 ARGS matmul ${mm_fast}/a.npy ${mm_fast}/b.npy
  --in-format e4m3 --scale-a 0.3 --scale-b 1.7 --out-format fp32 --expect ${mm_fast}/d.npy
  CONTAINS "D: 4096 elements compared, 4090 mismatches" "file  0x45A8E7D8 (5404.98046875)")
set(mm_e5m2 ${matmul_data}/fp8_e5m2xe4m3_bf16_fast_128x128x1024)
bitexact_cli_test(matmul_fp8_e5m2_e4m3 ARGS matmul ${mm_e5m2}/a.npy ${mm_e5m2}/b.npy --in-format e5m2 --b-format e4m3
  --scale-a 0.5 --scale-b 1.1 --preset cublas_sm90_fp8_fast_accum --expect ${mm_e5m2}/d.npy CONTAINS "D: 16384 elements compared, 0 mismatches")
bitexact_cli_test(matmul_error_fp8_without_scale RC 2 ARGS matmul ${mm_fast}/a.npy ${mm_fast}/b.npy --in-format e4m3
  ONE_LINE_ERROR ERROR_CONTAINS "an fp8 product needs --scale-a")
bitexact_cli_test(matmul_error_scale_on_bf16 RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --scale-a 2
  ONE_LINE_ERROR ERROR_CONTAINS "belong to fp8 products")
bitexact_cli_test(matmul_error_scale_count RC 2 ARGS matmul ${mm_rowwise}/a.npy ${mm_rowwise}/b.npy --in-format e4m3
  --scale-a ${mm_rowwise}/scale_b.npy --scale-b 1 ONE_LINE_ERROR ERROR_CONTAINS "--scale-a has shape [1, 256]; expected one value, [128] or [128, 1] (per row), [128, 8] (1 x 128 blocks)")
bitexact_cli_test(matmul_error_fp8_file_for_bf16 RC 2 ARGS matmul ${mm_fast}/a.npy ${mm_fast}/b.npy ONE_LINE_ERROR
  ERROR_CONTAINS "element type '<u1' does not hold bf16 bit patterns; save x.view(torch.int16)")
# Descriptions: the presets, a description file, block scales, torch.addmm's alpha and beta x C, fp8 split-K.
bitexact_cli_test(matmul_list_kernels ARGS matmul --list-kernels CONTAINS "cublas_sm90 " "cublas_sm90_fp8 "
  "cublas_sm90_fp8_fast_accum")
bitexact_cli_test(matmul_print_kernel ARGS matmul --print-kernel cublas_sm90_fp8 CONTAINS "\"tensor_core\": \"sm90_fp8\""
  "\"promotion_k\": 128" "\"block_scaling_1x128\": \"scale_a_then_fma_with_b\"")
bitexact_cli_test(matmul_error_preset RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --preset cublas ONE_LINE_ERROR
  ERROR_CONTAINS "unknown matmul preset 'cublas'; the presets are: cublas_sm90, cublas_sm90_fp8")
bitexact_cli_test(matmul_kernel_file ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy
  --kernel ${CMAKE_CURRENT_LIST_DIR}/data/matmul_kernels/cublas_sm90_splits_2.json --expect ${mm_split}/d.npy
  CONTAINS "kernel my_cublas_2_splits" "2 splits of K" "0 mismatches")
bitexact_cli_test(matmul_error_kernel_field RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy
  --kernel ${CMAKE_CURRENT_LIST_DIR}/data/matmul_kernels/unknown_field.json ONE_LINE_ERROR
  ERROR_CONTAINS "kernel description: field 'promotion': unknown field")
bitexact_cli_test(matmul_error_kernel_combination RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy
  --kernel ${CMAKE_CURRENT_LIST_DIR}/data/matmul_kernels/promotion_not_in_tile.json ONE_LINE_ERROR
  ERROR_CONTAINS "field 'promotion_k': a split's share of K is whole K tiles")
set(mm_blocks ${matmul_data}/fp8_e4m3_bf16_block1x128x128x128_256x256x1024)
bitexact_cli_test(matmul_fp8_block_scales ARGS matmul ${mm_blocks}/a.npy ${mm_blocks}/b.npy --in-format e4m3
  --scale-a ${mm_blocks}/scale_a.npy --scale-b ${mm_blocks}/scale_b.npy --expect ${mm_blocks}/d.npy
  CONTAINS "scales 1 x 128 blocks x 128 x 128 blocks" "D: 65536 elements compared, 0 mismatches")
bitexact_cli_test(matmul_error_block_scales_fast_accum RC 2 ARGS matmul ${mm_blocks}/a.npy ${mm_blocks}/b.npy
  --in-format e4m3 --scale-a ${mm_blocks}/scale_a.npy --scale-b ${mm_blocks}/scale_b.npy
  --preset cublas_sm90_fp8_fast_accum ONE_LINE_ERROR ERROR_CONTAINS "block scales need a description that promotes every 128 of K")
set(mm_addmm ${matmul_data}/bf16_addmm_128x128x4096_splitk_scaled)
bitexact_cli_test(matmul_addmm ARGS matmul ${mm_addmm}/a.npy ${mm_addmm}/b.npy --c ${mm_addmm}/c.npy --alpha -1.25
  --beta 0.75 --splits 3 --expect ${mm_addmm}/d.npy CONTAINS ", C -> bf16" "D: 256 elements compared, 0 mismatches")
bitexact_cli_test(matmul_addmm_needs_alpha RC 1 ARGS matmul ${mm_addmm}/a.npy ${mm_addmm}/b.npy --c ${mm_addmm}/c.npy
  --beta 0.75 --splits 3 --expect ${mm_addmm}/d.npy CONTAINS "D: 256 elements compared, 256 mismatches")
bitexact_cli_test(matmul_error_beta_without_c RC 2 ARGS matmul ${mm_addmm}/a.npy ${mm_addmm}/b.npy --beta 0.5
  ONE_LINE_ERROR ERROR_CONTAINS "--beta multiplies C; give --c FILE")
set(mm_addmm32 ${matmul_data}/bf16_addmm_fp32out_128x128x4096_splitk)
bitexact_cli_test(matmul_addmm_fp32_split_k ARGS matmul ${mm_addmm32}/a.npy ${mm_addmm32}/b.npy --c ${mm_addmm32}/c.npy
  --alpha 0.7 --beta 1.3 --splits 3 --out-format fp32 --expect ${mm_addmm32}/d.npy
  CONTAINS ", C -> fp32" "D: 256 elements compared, 0 mismatches")
bitexact_cli_test(matmul_error_out_format RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --out-format fp16
  ONE_LINE_ERROR ERROR_CONTAINS "a bf16 product writes bf16 or fp32, not fp16")
set(mm_fp8_split ${matmul_data}/fp8_e4m3_bf16_fast_64x64x16384)
bitexact_cli_test(matmul_fp8_split_k ARGS matmul ${mm_fp8_split}/a.npy ${mm_fp8_split}/b.npy --in-format e4m3
  --scale-a 0.0625 --scale-b 0.125 --preset cublas_sm90_fp8_fast_accum --splits 6 --expect ${mm_fp8_split}/d.npy
  CONTAINS "6 splits of K" "D: 16 elements compared, 0 mismatches")
# --explain: one element's account; a mismatch's account; Triton's presets on its captures.
bitexact_cli_test(matmul_explain ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --splits 2 --explain 0,0
  CONTAINS "D[0, 0] (row, col) by cublas_sm90: 2 splits of K" "split 1: K 1536 to 3000"
  "K  2992 to  2999  e_max   16  lsb 2^-9     7 cut  -> 0x4792C4A3 (75145.2734375)"
  "partials 0 to 1 added: 0x4820804C (164353.1875)" "rounded to bf16: 0x4821 (164864)")
bitexact_cli_test(matmul_error_explain_outside RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --explain 16,0
  ONE_LINE_ERROR ERROR_CONTAINS "--explain 16,0 is outside D, [16, 16]")
bitexact_cli_test(matmul_mismatch_explained RC 1 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy
  --expect ${mm_split}/d.npy CONTAINS "first mismatch at [0, 0] (row, col)" "D[0, 0] (row, col) by cublas_sm90: 1 split of K"
  "rounded to bf16: 0x4820 (163840)")
bitexact_cli_test(matmul_compare RC 1 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy
  --compare cublas_sm90,${CMAKE_CURRENT_LIST_DIR}/data/matmul_kernels/cublas_sm90_splits_2.json
  CONTAINS "B (my_cublas_2_splits) against A (cublas_sm90): 256 elements, 17 differ" "B above A: 17, below: 0"
  "the splits part at split 0: A takes K 0 to 3000, B 0 to 1536")
bitexact_cli_test(matmul_compare_fp8_accumulations RC 1 ARGS matmul ${mm_fast}/a.npy ${mm_fast}/b.npy --in-format e4m3
  --scale-a 0.3 --scale-b 1.7 --out-format fp32 --compare cublas_sm90_fp8_fast_accum,cublas_sm90_fp8
  CONTAINS "4090 differ" "the chains part in split 0: A's piece 0 takes K 0 to 2048, B's 0 to 128")
bitexact_cli_test(matmul_error_compare_splits RC 2 ARGS matmul ${mm_split}/a.npy ${mm_split}/b.npy --splits 2
  --compare cublas_sm90,triton_matmul_sm90 ONE_LINE_ERROR ERROR_CONTAINS "--compare computes two kernels")
set(triton_data ${CMAKE_CURRENT_LIST_DIR}/data/matmul_triton)
set(tr_two_warps ${triton_data}/e5m2_256x256x1024_fp8_mixed)
bitexact_cli_test(matmul_triton_fp8_two_warps ARGS matmul ${tr_two_warps}/a.npy ${tr_two_warps}/b.npy --in-format e5m2
  --scale-a 1 --scale-b 1 --out-format fp16 --preset triton_matmul_sm90_fp8_two_warps --expect ${tr_two_warps}/d.npy
  CONTAINS "D: 256 elements compared, 0 mismatches")
bitexact_cli_test(matmul_triton_fp8_identify ARGS matmul ${tr_two_warps}/a.npy ${tr_two_warps}/b.npy --in-format e5m2
  --scale-a 1 --scale-b 1 --out-format fp16 --expect ${tr_two_warps}/d.npy --identify
  CONTAINS "triton_matmul_sm90_fp8_two_warps, --splits 1")
# An fp8 step (the sm90_fp8 unit: 32 products, 13 bits, each sum rounded toward zero to E8M13): the sum
# 111.0000100000111 has 16 significant bits, and E8M13 keeps 14.
bitexact_cli_test(trace_mma_fp8_e8m13 ARGS trace mma 1.875,1.875,0.029296875,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0 1.875,1.875,0.029296875,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0 0
  --unit sm90_fp8 --from e4m3 CONTAINS "32 products + C -> fp32" "rounding to e8m13 (14 significand bits)"
  "1.1100001000001 | guard 1 | round 1" "fp32:0x40E10400 (7.03173828125)")
bitexact_cli_test(error_trace_mma_fp8_unit RC 2 ARGS trace mma 1,1 1,1 0 --from e4m3 ONE_LINE_ERROR
  ERROR_CONTAINS "the sm90 unit takes bf16, fp16 factors, not e4m3; --unit sm90_fp8 takes them")
