#!/usr/bin/env bash
# Disassembles the flash-attention forward kernels that PyTorch ships (the
# sm_90 cubins inside libtorch_cuda.so), so that the emulator's instruction
# sequences (exp2, the score scaling, the reciprocal, __logf, the combine
# kernel's expf/logf) are read from the binary, not assumed. Writes
# $OUT/flash_sass.txt.xz: the SASS of every bf16 flash_fwd function whose
# kernel traits are among those PyTorch picks on sm_90 for head dims 64 and 128
# (<64,128,128>, <128,128,64>, split <64,64,256>, <128,64,128>), the combine
# kernels included.
set -u
: "${OUT:?OUT must name the output folder}"
LIB=$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib", "libtorch_cuda.so"))')
WORK=$(mktemp -d)
LISTING=$(mktemp)
{
  echo "== library: $LIB ($(stat -c %s "$LIB") bytes)"
  cd "$WORK" || exit 1
  # Every embedded sm_90 ELF, then the ones whose symbols name flash kernels.
  time cuobjdump -xelf all "$LIB" >/dev/null
  ls | grep -v 'sm_90' | xargs -r rm -f
  echo "== sm_90 cubins: $(ls | wc -l)"
  for f in $(grep -l 'flash_fwd' ./*.cubin); do
    echo "== cubin $f"
    cuobjdump -sass "$f" | awk '/Function : /{keep = ($0 ~ /flash_fwd/ && $0 ~ /bfloat16/ &&
      $0 ~ /traitsILi(64ELi128ELi128|128ELi128ELi64|64ELi64ELi256|128ELi64ELi128)E/)} keep'
  done
} >"$LISTING" 2>&1
xz -T16 -6 -c "$LISTING" >"$OUT/flash_sass.txt.xz"
grep -c 'Function : ' "$LISTING"
rm -rf "$WORK" "$LISTING"
