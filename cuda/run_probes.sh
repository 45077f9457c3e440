#!/usr/bin/env bash
# Runs every probe on a Hopper GPU, from the repository root, and keeps the log.
#   bash cuda/run_probes.sh [--quick] [probe...]
# Probes come from $PROBE_BIN (default build-cuda/cuda, built by CMake with
# nvcc present); a missing one is built here with nvcc alone, since the
# probes need only the core headers.
set -u
quick=""
if [ "${1:-}" = "--quick" ]; then quick="--quick"; shift; fi
probes=("$@")
[ ${#probes[@]} -eq 0 ] && probes=(probe_alu probe_mma probe_mufu)
bin=${PROBE_BIN:-build-cuda/cuda}
log=${OUT:-.}/probes.log
status=0
{
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  nvcc --version | tail -1
} 2>&1 | tee -a "$log"
for probe in "${probes[@]}"; do
  exe="$bin/$probe"
  if [ ! -x "$exe" ]; then
    mkdir -p /tmp/probes
    nvcc -std=c++20 -O3 -gencode=arch=compute_90a,code=sm_90a -Iinclude -o "/tmp/probes/$probe" "cuda/$probe.cu" || exit 1
    exe="/tmp/probes/$probe"
  fi
  echo "== $probe $quick" | tee -a "$log"
  start=$(date +%s)
  "$exe" $quick 2>&1 | tee -a "$log"
  rc=${PIPESTATUS[0]}
  echo "== $probe exit $rc, $(( $(date +%s) - start )) s" | tee -a "$log"
  [ "$rc" -eq 0 ] || status=1
done
exit $status
