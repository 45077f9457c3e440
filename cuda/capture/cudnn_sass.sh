#!/usr/bin/env bash
# The SASS of the kernels that PyTorch's cuDNN SDPA backend launches on this
# GPU (cuDNN compiles them at run time, so no library holds them: Nsight
# Compute prints the SASS of the kernel it profiled), for reading how cuDNN
# rounds (docs/why-kernels-disagree.md).
# Device machine, repository root:  bash cuda/capture/cudnn_sass.sh OUTDIR
set -euo pipefail
out=${1:?usage: cudnn_sass.sh OUTDIR}
mkdir -p "$out"
cat > "$out/call.py" <<'PY'
import sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
d = int(sys.argv[1])
q = torch.randn(1, 8, 1024, d, dtype=torch.bfloat16, device="cuda")
with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
    torch.ops.aten._scaled_dot_product_cudnn_attention(q, q, q, None, True, 0.0, False, False)
torch.cuda.synchronize()
PY
for d in 64 128; do
  ncu --kernel-name regex:sdpa --launch-count 1 --section SourceCounters --page source --print-source sass \
      --csv python3 "$out/call.py" $d > "$out/sass_d$d.csv" 2> "$out/ncu_d$d.log" || true
  wc -l "$out/sass_d$d.csv"
done
