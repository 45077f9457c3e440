#!/usr/bin/env bash
# Instructions and mispredicted conditional branches per operation by
# callgrind (valgrind, with its simple branch predictor), loop overhead
# included (subtract the "loop" row from the single operations; the _each
# rows are whole-buffer calls and include their own loop): the difference
# between 25 and 5 passes over 4096 operands, divided by 20 x 4096, so
# start-up and set-up cancel out.
#   bash bench/count_instructions.sh [build/bench/instructions_per_operation]
set -eu
exe=${1:-build/bench/instructions_per_operation}
dir=$(mktemp -d)
for what in loop fp32_add fp32_mul bf16_add fp32_add_observed fp32_mul_observed bf16_add_observed fp32_add_each \
    fp32_mul_each bf16_add_each; do
  for passes in 5 25; do
    valgrind --tool=callgrind --branch-sim=yes --callgrind-out-file="$dir/$what.$passes" "$exe" "$what" "$passes" \
      2>/dev/null
  done
  # totals: Ir Bc Bcm Bi Bim (the events line names them)
  awk -v w="$what" '
    /^events:/ { for (i = 2; i <= NF; ++i) column[$i] = i - 1 }
    /^totals:/ { ir[FILENAME] = $(column["Ir"] + 1); miss[FILENAME] = $(column["Bcm"] + 1) }
    END {
      n = 0; for (f in ir) files[++n] = f
      low = (files[1] ~ /\.5$/) ? files[1] : files[2]; high = (low == files[1]) ? files[2] : files[1]
      printf "%-20s %6.1f instructions, %5.2f mispredicted branches per operation\n", w,
             (ir[high] - ir[low]) / (20 * 4096), (miss[high] - miss[low]) / (20 * 4096)
    }' "$dir/$what.5" "$dir/$what.25"
done
rm -rf "$dir"
