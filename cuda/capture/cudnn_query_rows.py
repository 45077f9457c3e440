#!/usr/bin/env python3
"""Which kernel PyTorch's cuDNN SDPA backend runs for few query rows: for N_q
from 1 to 17 (N_k = N_q, and N_k = 256), d 64 and 128, causal and not, the
kernel names torch.profiler sees, and q, k, v, O, L for each call, to be
checked against pytorch_sdpa_cudnn_sm90 (docs/why-kernels-disagree.md, cuDNN).

    python3 cuda/capture/cudnn_query_rows.py OUTDIR
"""
import json
import os
import sys

import numpy as np
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(__file__))
from flash_attention import bits16, versions  # noqa: E402

out = sys.argv[1] if len(sys.argv) == 2 else sys.exit(__doc__)
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(77)
manifest = {"versions": versions(), "calls": []}
for d in (64, 128):
    for n in range(1, 18):
        for n_k in (n, 256):
            for causal in (False, True):
                if causal and n_k != n:
                    continue
                q, k, v = (torch.randn(1, 2, m, d, generator=g).bfloat16().cuda() for m in (n, n_k, n_k))
                with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
                    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                        o, lse = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal,
                                                                                   False)[:2]
                    torch.cuda.synchronize()
                kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
                name = f"d{d}_q{n}_k{n_k}_{'causal' if causal else 'full'}"
                folder = os.path.join(out, name)
                os.makedirs(folder, exist_ok=True)
                for x, t in (("q", q), ("k", k), ("v", v), ("o", o)):
                    np.save(os.path.join(folder, f"{x}.npy"), bits16(t))
                np.save(os.path.join(folder, "lse.npy"), lse.float().reshape(1, 2, n).contiguous().cpu().numpy())
                manifest["calls"].append(dict(name=name, d=d, N=n, NK=n_k, causal=causal, kernels=kernels))
                print(name, [k_ for k_ in kernels if "sdpa" in k_ or "fprop" in k_], flush=True)
json.dump(manifest, open(os.path.join(out, "manifest.json"), "w"), indent=1)
