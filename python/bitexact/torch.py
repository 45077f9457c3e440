"""bitexact's flash-attention forward kernels on the GPU, as PyTorch operators (torch.ops.bitexact.*).

Swap them into a model with one line:

    import torch.nn.functional as F
    import bitexact.torch
    F.scaled_dot_product_attention = bitexact.torch.scaled_dot_product_attention  # PyTorch flash's bits
    F.scaled_dot_product_attention = bitexact.torch.stabilized(beta=2.0, eps=1e-3)  # the paper's fix
    F.scaled_dot_product_attention = bitexact.torch.stabilized(across_blocks=True)  # and across K/V blocks

The standard kernel gives the bits of PyTorch's flash backend on its single-split path; the stabilized ones
those of the emulator presets pytorch_sdpa_flash_sm90_stabilized and
pytorch_sdpa_flash_sm90_stabilized_across_blocks. They take bf16 CUDA tensors [B, H, N, d] with d 64 or 128
at the strides a model hands over (no copy), fewer K/V heads with enable_gqa, causal or no mask, no dropout.
Anything else is refused with one line, never computed otherwise.

Gradients are PyTorch's own flash backward on the forward's O and L, for every variant (the paper's fix
changes the forward alone); the operator's autograd is C++ (python/src/torch_ops.cpp), so a step costs no
Python for it. torch.compile(fullgraph=True) and CUDA graphs take the operators.

The operators are built by `pip install` (or CMake) when nvcc and PyTorch are found at build time; an
install without them has no file to load, and importing this module says how to get it.
"""
import glob
import math
import os

import torch

_here = os.path.dirname(os.path.abspath(__file__))
_found = sorted(glob.glob(os.path.join(_here, "_bitexact_torch*.so")))
if not _found:
    raise ImportError("bitexact.torch: this install has no GPU kernels (they are built only where nvcc and PyTorch "
                      "are found at install time); on such a machine: pip install --no-build-isolation .")
torch.ops.load_library(_found[0])

# The kernels' two structures of one arithmetic, the same bits (cuda/attention/check_flash_forward.py):
# Hopper's warp-specialised wgmma, the faster, which everything here uses, and FlashAttention-2's.
STRUCTURES = ("wgmma", "fa2")

flash_forward = torch.ops.bitexact.flash_forward
# The overload itself: calling it skips the packet's overload resolution, a few microseconds a call.
_flash_forward = flash_forward.default
flash_forward.__doc__ = """flash_forward(query, key, value, is_causal, scale, stabilize=0, beta=2.0, eps=1e-3,
structure="wgmma") -> (O, L): O (bf16, [B, H, N, d], laid out [B, N, H, d] as PyTorch's flash backend lays
it out) and the log-sum-exp L (fp32 [B, H, N], natural log) of one forward pass, as
aten._scaled_dot_product_flash_attention returns them. scale: the softmax scale the kernel receives (rounded
to fp32). A causal mask with N != N_k is aligned to the bottom right, as flash-attention's. stabilize: 0
PyTorch's arithmetic, 1 the paper's Algorithm 3 in each K/V block, 2 the same rule across blocks; 1 and 2
need scale > 0 and eps finite. Key and value may have fewer heads than the query, dividing them (query head
h reads K/V head h // (H / H_kv)). L is not differentiable."""


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, stabilize, beta, eps):
    if attn_mask is not None or dropout_p != 0.0:
        raise NotImplementedError("bitexact.torch: no attn_mask and no dropout (is_causal is the only mask)")
    if key.dim() == 4 and key.shape[1] != query.shape[1] and not enable_gqa:
        raise ValueError(f"bitexact.torch: key has {key.shape[1]} heads and query {query.shape[1]}: pass "
                         f"enable_gqa=True for grouped-query attention, as scaled_dot_product_attention wants")
    if is_causal and query.shape[-2] != key.shape[-2]:
        # scaled_dot_product_attention aligns such a mask to the top left, the
        # kernels (as flash-attention) to the bottom right: refuse, not differ.
        raise NotImplementedError("bitexact.torch: is_causal with query and key lengths that differ (call "
                                  "flash_forward for flash-attention's bottom-right mask)")
    # PyTorch's default scale, as its flash backend receives it: 1/sqrt(d) in double, then float.
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    return _flash_forward(query, key, value, is_causal, scale, stabilize, beta, eps, "wgmma")[0]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention's signature, on the standard kernel: PyTorch's
    flash-backend bits (single-split path)."""
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, 0, 2.0, 1e-3)


def stabilized(beta=2.0, eps=1e-3, across_blocks=False):
    """scaled_dot_product_attention on a stabilized kernel: the paper's Algorithm 3 with these beta and eps
    in each K/V block, or across blocks."""
    rule = 2 if across_blocks else 1

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, rule, beta, eps)
    return attention


def flash_forward_with_indicator(query, key, value, is_causal=False, scale=None, eps=1e-3, structure="wgmma"):
    """The standard kernel's O and L (PyTorch's flash bits, single-split path) and, from the same pass, the
    leading indicator of docs/bias.md per query row, as int32 [B, H, N]: p_bar_ones, the keys whose bf16
    P-bar is exactly 1 as P V takes them, and max_repeated, 1 where the row's two largest scores pass the
    paper's tie test RN(RN(max - s) * scale) <= eps. Per head, the training-loop counts are
    (p_bar_ones >= 2).sum(-1) and max_repeated.sum(-1). Not differentiable."""
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    return torch.ops.bitexact.flash_forward_indicator(query, key, value, is_causal, scale, eps, structure)
