#!/usr/bin/env bash
# Runs one capture program on the device machine, from the repository root,
# and writes its files into $OUT:
#   bash cuda/capture/run_capture.sh              # capture.cu: MUFU ex2/rcp, ALU, conversions, tensor cores
#   bash cuda/capture/run_capture.sh capture_lg2  # capture_lg2.cu: MUFU lg2
#   bash cuda/capture/run_capture.sh capture_lowp # capture_lowp.cu: fp8 and tf32 wgmma (ten files: pack them)
# (at most 8 files come back from a device run: capture_lowp writes ten, so pack them).
# Uses the prebuilt binary $CAPTURE_BIN (default .captures/bin/PROGRAM) when it
# runs on this driver, else builds one here. info.txt starts with the
# machine's description and ends with the binary's full SASS.
set -u
: "${OUT:?OUT must name the output folder}"
PROGRAM=${1:-capture}
SRC=cuda/capture
BIN=${CAPTURE_BIN:-.captures/bin/$PROGRAM}
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
    nvcc -gencode=arch=compute_90a,code=sm_90a -O3 -std=c++17 -o "/tmp/capture-build/$PROGRAM" "$SRC/$PROGRAM.cu" || exit 1
    BIN=/tmp/capture-build/$PROGRAM
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
