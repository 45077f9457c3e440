# `bitexact bias statistics --inputs e4m3`: the rounding-bias statistics on bitexact's FP8 kernel
# (src/bias_statistics.cpp). Included after cli.cmake, whose bitexact_cli_test it uses (prefix cli_).

if(NOT COMMAND bitexact_cli_test)
  return()
endif()

# The run the independent check below recomputes (with betas 2 and 7): 256 keys in two blocks of 128,
# the pv_fp32_add variant's and its p_bar_sum's columns between the standard and the stabilized (the
# same p_one: their P-bar are the standard's), positive maxima [4, 32). The standard kernel stores
# P-bar = e4m3(RN(P * 256)) = 256 at the 8 ties and at the keys within 3% of the running max of a
# block it takes before the ties' block (10.00 a row); the
# per-block rule moves the ties' P-bar off 256 (1.06: earlier blocks' lone maxima and near-maxima);
# every row keeps exactly t maxima after quantisation (tied 32) and none loses half of O at beta 2.
bitexact_cli_test(bias_fp8_statistics_small ARGS bias statistics --inputs e4m3 --head-dims 64 --keys 256 --rows 8
  --heads 4 --ties 1,8 --maxima positive --placements one_block --v-means 1 --betas 2 --threads 2
  CONTAINS "bitexact_flash_fp8_sm90: o, delta, p_one, lost" "bitexact_flash_fp8_sm90_pv_fp32_add: o, delta, p_one, lost"
  "bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum: o, delta, p_one, lost"
  "bitexact_flash_fp8_sm90_stabilized beta 2: o, delta, p_one, lost"
  " 64   256 positive           one_block        8    1     32    32     32 |           -3.98e-03±1.0e-03 -2.56e-01±6.7e-02  10.00    0            |           -2.51e-03±9.9e-04 -1.58e-01±6.4e-02  10.00    0            |           -1.12e-03±9.5e-05 -7.31e-02±7.1e-03  10.00    0            |           -2.48e-03±2.6e-03 -1.54e-01±1.6e-01   1.06    0")
# --across-blocks adds the third FP8 preset; beta 7 flushes every P-bar of 9 rows (P * 256 < 2^-10 at a
# repeated max of up to 32 scaled by 1/8: exp(-6 * 4) * 256), which the lost column shows.
bitexact_cli_test(bias_fp8_statistics_lost_rows ARGS bias statistics --inputs e4m3 --head-dims 64 --keys 256 --rows 8
  --heads 4 --ties 1,8 --maxima positive --placements one_block --v-means 1 --betas 7 --across-blocks --threads 2
  --csv ${BITEXACT_CLI_DATA}/bias_fp8_statistics.csv --svg ${BITEXACT_CLI_DATA}/bias_fp8_statistics.svg
  CONTAINS "bitexact_flash_fp8_sm90_stabilized_across_blocks beta 7: o, delta, p_one, lost"
  "  1.06    9")
# bf16 stays the default: --inputs bf16 prints what the command printed before the option existed.
bitexact_cli_test(bias_fp8_statistics_bf16_unchanged ARGS bias statistics --inputs bf16 --maxima negative --ties 8
  --v-means -1 --heads 2 --rows 16 --threads 2
  CONTAINS " 64   512 negative           one_block        8   -1     32    32 |"
  " 64   512 negative           sink             8   -1     32     2 |")
bitexact_cli_test(bias_fp8_statistics_error_e5m2 RC 2 ARGS bias statistics --inputs e5m2 ONE_LINE_ERROR
  ERROR_CONTAINS "--inputs expects bf16 or e4m3 (the FP8 kernel's presets take e4m3 Q, K and V), not 'e5m2'")
bitexact_cli_test(bias_fp8_statistics_error_backward RC 2 ARGS bias statistics --backward --inputs e4m3 ONE_LINE_ERROR
  ERROR_CONTAINS "--backward runs PyTorch's bf16 flash backward; it takes --inputs bf16, not e4m3")
bitexact_cli_test(bias_fp8_statistics_error_save_heads RC 2 ARGS bias statistics --inputs e4m3 --save-heads x
  ONE_LINE_ERROR ERROR_CONTAINS "--save-heads writes bf16 heads; it takes --inputs bf16, not e4m3")

# The independent computation (tests/bias_fp8_reference.py, pure Python): p_one, the rows with exactly
# t maxima and the rows that lost half of O, for the first run above with betas 2 and 7.
find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  add_test(NAME cli_bias_fp8_statistics_reference
           COMMAND Python3::Interpreter ${CMAKE_CURRENT_LIST_DIR}/bias_fp8_reference.py $<TARGET_FILE:bitexact_cli>)
  set_tests_properties(cli_bias_fp8_statistics_reference PROPERTIES PASS_REGULAR_EXPRESSION "6 \\(kernel, ties\\) pairs compared, 0 differ")
endif()
