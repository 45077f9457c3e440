#!/usr/bin/env python3
"""Cuts heads out of a flash-attention capture into tests/data: for each chosen
scenario and head, that one head's arrays as .npy files, and one line in
MANIFEST with the shape of the call (which decides the path and the split
count), the head kept, and the FNV-1a 64 of every file. Needs NumPy.

    python3 tools/pack_attention_captures.py CAPTURE_DIR OUT_DIR SCENARIO:HEAD [SCENARIO:HEAD ...]
    python3 tools/pack_attention_captures.py kernel HEADS_DIR OUT_DIR SCENARIO:HEAD [SCENARIO:HEAD ...]
    python3 tools/pack_attention_captures.py backends CAPTURE_DIR OUT_DIR SCENARIO:HEAD [SCENARIO:HEAD ...]
    python3 tools/pack_attention_captures.py backward CAPTURE_DIR OUT_DIR SCENARIO:HEAD [SCENARIO:HEAD ...]

The first takes PyTorch's flash backend (cuda/capture/flash_attention.py
capture DIR; q, k, v, o, lse), the second our own kernels
(cuda/attention/check_flash_forward.py DIR; q, k, v and o, lse of the
standard, the stabilized and the across-blocks kernel), the third the other
backends (cuda/capture/triton_attention.py DIR; q, k, v and o, lse of
FlexAttention, of examples/triton/flash_forward.py and of PyTorch's
memory-efficient backend where it ran), the fourth PyTorch's flash backward
(cuda/capture/flash_backward.py DIR; q, k, v, o, lse, do and the deterministic
dq, dk, dv).
"""
import json
import os
import struct
import sys

import numpy as np


def fnv1a64(data):
    # The project's FNV-1a 64 (include/bitexact/core/checksum.hpp), whose offset
    # basis, 1469598103934665603, is a digit short of the standard one: every
    # checksum in tests/data and data/ uses it, so this does too.
    h = 1469598103934665603
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def read_npy(path):
    """(descr, shape, raw bytes) of a .npy file, its header read by NumPy."""
    array = np.load(path, mmap_mode="r")
    return array.dtype.str, array.shape, np.ascontiguousarray(array).tobytes()


def write_npy(path, descr, shape, data):
    shape_text = "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_text)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1") + data)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] in ("kernel", "backends", "backward") else "pytorch"
    kernel = mode == "kernel"
    args = sys.argv[2:] if mode != "pytorch" else sys.argv[1:]
    if len(args) < 3:
        sys.exit(__doc__)
    capture, out = args[0], args[1]
    manifest = json.load(open(os.path.join(capture, "manifest.json")))
    by_name = {s["name"]: s for s in manifest["scenarios"]}
    v = manifest["versions"]
    gpu = (f"GPU {v['gpu']} (sm_{v['capability'].replace('.', '')}, {v['sm_count']} SMs), driver "
           f"{v['nvidia_smi'].split(', ')[-1]}, torch {v['torch']}, CUDA {v['cuda']}.")
    if kernel:
        lines = [
            "# Our flash-attention kernels (cuda/attention/flash_forward.cu), one head per case: standard, stabilized",
            f"# per block and across blocks (beta {manifest['beta']}, eps {manifest['eps']}) on the same inputs "
            "(cuda/attention/check_flash_forward.py; tools/pack_attention_captures.py kernel).",
            "# " + gpu,
            "# case NAME BATCH HEADS QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL SCALE SPLITS HEAD (as in ../attention/MANIFEST;",
            "#   SPLITS is 1: the call had heads enough for PyTorch's single-split kernel, which the standard variant matched)",
            "# file FNV1A64 PATH",
        ]
        arrays = ("q", "k", "v", "o_standard", "lse_standard", "o_stabilized", "lse_stabilized", "o_across", "lse_across")
    elif mode == "backends":
        lines = [
            "# Attention kernels other than PyTorch's flash backend, one head per case, on the same inputs:",
            "# torch.compile(flex_attention) (default configuration, causal through a bottom-right block mask),",
            "# examples/triton/flash_forward.py, and where captured PyTorch's memory-efficient backend",
            "# (o_efficient, lse_efficient padded to a multiple of 32 rows) and cuDNN backend (o_cudnn, lse_cudnn)",
            "# (cuda/capture/triton_attention.py; tools/pack_attention_captures.py backends).",
            "# " + gpu + f" Triton {v['triton']}.",
            "# case NAME BATCH HEADS QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL SCALE SPLITS HEAD (as in ../attention/MANIFEST; SPLITS 1)",
            "# file FNV1A64 PATH",
        ]
        arrays = ("q", "k", "v", "o_flex", "lse_flex", "o_triton_example", "lse_triton_example", "o_efficient",
                  "lse_efficient", "o_cudnn", "lse_cudnn")
    elif mode == "backward":
        lines = [
            "# PyTorch's flash-attention backward (aten._scaled_dot_product_flash_attention_backward) under",
            "# torch.use_deterministic_algorithms(True), one head per case: q, k, v, the forward's o and lse, a random do,",
            "# and dq, dk, dv (cuda/capture/flash_backward.py; tools/pack_attention_captures.py backward).",
            "# " + gpu,
            "# case NAME BATCH HEADS QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL SCALE SPLITS HEAD (as in ../attention/MANIFEST;",
            "#   SPLITS: the deterministic dQ's buffers, ceil(SMs / (BATCH HEADS)))",
            "# file FNV1A64 PATH",
        ]
        arrays = ("q", "k", "v", "o", "lse", "do", "dq", "dk", "dv")
    else:
        lines = [
            "# Flash-attention captures: PyTorch's SDPA flash backend, one head per case (tools/pack_attention_captures.py).",
            "# " + gpu,
            "# case NAME BATCH HEADS QUERY_ROWS KEY_ROWS HEAD_DIM CAUSAL SCALE SPLITS HEAD (SCALE: default or a decimal;",
            "#   SPLITS: the split count PyTorch's launch grid showed; HEAD: the head kept, of the call's B x H)",
            "# file FNV1A64 PATH",
        ]
        arrays = ("q", "k", "v", "o", "lse")
    os.makedirs(out, exist_ok=True)
    for item in args[2:]:
        name, head = item.rsplit(":", 1)
        s = by_name[name]
        assert s["B"] == 1 or mode == "backward", "captures keep heads of batch 1"
        kept = (int(head) if mode == "backends" else s["keep"].index(int(head)) if mode in ("kernel", "backward")
                else s["keep_heads"].index(int(head)))
        case = f"{name}_h{head}"
        os.makedirs(os.path.join(out, case), exist_ok=True)
        scale = "default" if s["scale"] is None else repr(s["scale"])
        splits = (s["splits"] if mode == "pytorch" else
                  -(-v["sm_count"] // (s["B"] * s["H"])) if mode == "backward" else 1)
        lines.append(f"case {case} {s['B']} {s['H']} {s['N']} {s.get('NK', s['N'])} {s['d']} {int(s['causal'])} "
                     f"{scale} {splits} {head}")
        for array in arrays:
            if mode == "backends" and not os.path.exists(os.path.join(capture, name, array + ".npy")):
                continue  # a backend that refused the shape
            descr, shape, data = read_npy(os.path.join(capture, name, array + ".npy"))
            heads_axis = 0 if kernel else 1  # ours: [heads kept, N(, d)]; PyTorch's: [B or 1, heads kept, N(, d)]
            per_head = len(data) // shape[heads_axis]
            part = data[kept * per_head:(kept + 1) * per_head]
            path = os.path.join(out, case, array + ".npy")
            write_npy(path, descr, shape[heads_axis + 1:], part)
            lines.append(f"file {fnv1a64(open(path, 'rb').read()):016x} {case}/{array}.npy")
    with open(os.path.join(out, "MANIFEST"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
