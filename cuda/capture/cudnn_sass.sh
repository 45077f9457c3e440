#!/usr/bin/env bash
# The SASS of the kernel that PyTorch's cuDNN SDPA backend launches on this
# GPU for one call (cuDNN compiles its kernels at run time, so no library holds
# them: Nsight Compute prints the SASS of the kernel it profiled), for reading
# how cuDNN rounds (docs/why-kernels-disagree.md).
# Device machine, repository root:
#   bash cuda/capture/cudnn_sass.sh OUTDIR [N [causal]]
# N query and key rows (1024 by default), d 64 and 128; "causal" for is_causal.
# Writes OUTDIR/sass_d<d>_n<N>[_causal].csv and the profiler's log beside it.
set -euo pipefail
out=${1:?usage: cudnn_sass.sh OUTDIR [N [causal]]}
n=${2:-1024}
causal=${3:-}
mkdir -p "$out"
cat > "$out/call.py" <<'PY'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
d, n, causal = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "causal"
q = torch.randn(1, 8, n, d, dtype=torch.bfloat16, device="cuda")
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    torch.ops.aten._scaled_dot_product_cudnn_attention(q, q, q, None, True, 0.0, causal, False)
torch.cuda.synchronize()
PY
for d in 64 128; do
  name="sass_d${d}_n${n}${causal:+_causal}"
  ncu --kernel-name regex:sdpa --launch-count 1 --section SourceCounters --page source --print-source sass \
      --csv python3 "$out/call.py" $d "$n" "${causal:-full}" > "$out/$name.csv" 2> "$out/$name.log" || true
  wc -l "$out/$name.csv"
done
