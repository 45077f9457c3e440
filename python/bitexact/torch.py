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

Our FP8 forward kernel is torch.ops.bitexact.flash_forward_fp8 (e4m3 Q, K, V with per-tensor descales, bf16
O; the emulator's presets bitexact_flash_fp8_sm90[_stabilized[_across_blocks]] give its bits), forward only;
fp8_attention(...) wraps it as an F.scaled_dot_product_attention replacement for training with an FP8
forward: Q, K and V quantised per tensor (amax / 448), PyTorch's bf16 flash backward on the forward's O and L.

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


flash_forward_fp8 = torch.ops.bitexact.flash_forward_fp8
flash_forward_fp8.__doc__ = """flash_forward_fp8(query, key, value, is_causal, scale, descale_q=1.0, descale_k=1.0,
descale_v=1.0, scale_s=256.0, descale_s=1/256, scale_o=1.0, stabilize=0, beta=2.0, eps=1e-3, indicator=False,
pv_fp32_add=False, p_bar_sum=False) -> (O, L, p_bar_ones, max_repeated): our FP8 forward kernel. query, key, value: torch.float8_e4m3fn
[B, H, N, d], d 64 or 128, unit stride on d, x / descale_x of the real tensors. O bf16 (laid out
[B, N, H, d]), L fp32 [B, H, N] in natural-log units of the descaled scores. P-bar = e4m3(RN(P * scale_s)),
O's factor RN(RN(1 / l) * RN(RN(descale_s * descale_v) * scale_o)), the scores' scale
RN(RN(scale * descale_q) * descale_k) (docs/attention.md). indicator=True also returns the leading indicator
per row (int32 [B, H, N]): the keys whose P-bar equals the row max's (e4m3(scale_s)), and the tie test;
else two empty tensors. pv_fp32_add=True: each K/V block's P V from +0, then one FADD into O, instead of O
as the fp8 unit's C (the preset bitexact_flash_fp8_sm90_pv_fp32_add; docs/rounding-bias.md section 7).
p_bar_sum=True (with pv_fp32_add): l sums the e4m3 P-bar that P V takes, times descale_s, instead of the fp32 P
(the preset bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum). Not differentiable (fp8_attention is)."""

E4M3_MAX = 448.0


def quantise_e4m3(x):
    """x as torch.float8_e4m3fn with its per-tensor descale amax / 448 (Transformer Engine's recipe), and
    the descale as a Python float (one device-to-host copy)."""
    descale = max(float(x.detach().abs().amax().float()), 1e-30) / E4M3_MAX
    return (x.float() / descale).to(torch.float8_e4m3fn), descale


class _FP8Attention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, query, key, value, is_causal, scale, stabilize, beta, eps):
        (q8, dq), (k8, dk), (v8, dv) = (quantise_e4m3(x) for x in (query, key, value))
        o, lse, _, _ = flash_forward_fp8(q8, k8, v8, is_causal, scale, dq, dk, dv, 256.0, 1.0 / 256, 1.0,
                                         stabilize, beta, eps, False)
        ctx.save_for_backward(query, key, value, o, lse)
        ctx.is_causal, ctx.scale = is_causal, scale
        return o

    @staticmethod
    def backward(ctx, grad_o):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
            grad_o if grad_o.stride(-1) == 1 else grad_o.contiguous(), q, k, v, o, lse, None, None, q.shape[2],
            k.shape[2], 0.0, ctx.is_causal, None, None, scale=ctx.scale)
        return dq, dk, dv, None, None, None, None, None


def fp8_attention(stabilize=0, beta=2.0, eps=1e-3):
    """An F.scaled_dot_product_attention replacement whose forward is our FP8 kernel (stabilize 0 standard,
    1 the paper's rule per K/V block, 2 across blocks) on bf16 Q, K, V quantised per tensor to e4m3, and
    whose backward is PyTorch's bf16 flash backward on the forward's O and L: training with an FP8
    forward, as issue 33 asks. No mask but is_causal, no dropout, equal query and key heads."""

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        if attn_mask is not None or dropout_p != 0.0 or enable_gqa:
            raise NotImplementedError("bitexact.torch.fp8_attention: no attn_mask, dropout or enable_gqa")
        scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
        return _FP8Attention.apply(query, key, value, is_causal, scale, stabilize, beta, eps)
    return attention
