#!/usr/bin/env bash
# Runs on the device machine from the repository root and writes every
# capture into $OUT (at most 8 files come back: info.txt, sfu_tables_a.bin,
# sfu_tables_b.bin, ops.bin and four mma files). Uses the binary prebuilt in
# .captures/bin/capture when it runs on this driver, else builds one here.
set -u
: "${OUT:?OUT must name the output folder}"
SRC=cuda/capture
BIN=.captures/bin/capture
{
    echo "== nvidia-smi"
    nvidia-smi --query-gpu=name,driver_version,vbios_version,clocks.max.sm,memory.total --format=csv
    nvidia-smi | head -20
    echo "== nvcc"
    nvcc --version
    echo "== uname"
    uname -a
} >"$OUT/info.txt" 2>&1
if ! [ -x "$BIN" ] || ! "$BIN" "$OUT" --probe; then
    echo "prebuilt binary unusable here: building" | tee -a "$OUT/info.txt"
    mkdir -p /tmp/capture-build
    nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o /tmp/capture-build/capture "$SRC/capture.cu" || exit 1
    BIN=/tmp/capture-build/capture
fi
timeout 420 "$BIN" "$OUT"
status=$?
echo "== capture exit status $status" >>"$OUT/info.txt"
{
    echo "== SASS (cuobjdump -sass)"
    cuobjdump -sass "$BIN"
} >>"$OUT/info.txt" 2>&1
ls -l "$OUT"
exit $status
