#!/usr/bin/env bash
# Instructions per operation by callgrind (valgrind), loop overhead included
# (subtract the "loop" row): the difference between 25 and 5 passes over 4096
# operands, divided by 20 x 4096, so start-up and set-up cancel out.
#   bash bench/count_instructions.sh [build/bench/instructions_per_operation]
set -eu
exe=${1:-build/bench/instructions_per_operation}
dir=$(mktemp -d)
for what in loop fp32_add fp32_mul bf16_add fp32_add_observed fp32_mul_observed bf16_add_observed; do
  for passes in 5 25; do
    valgrind --tool=callgrind --callgrind-out-file="$dir/$what.$passes" "$exe" "$what" "$passes" 2>/dev/null
  done
  low=$(awk '/^totals:/ {print $2}' "$dir/$what.5")
  high=$(awk '/^totals:/ {print $2}' "$dir/$what.25")
  awk -v w="$what" -v l="$low" -v h="$high" 'BEGIN { printf "%-20s %6.1f instructions per operation\n", w, (h - l) / (20 * 4096) }'
done
rm -rf "$dir"
