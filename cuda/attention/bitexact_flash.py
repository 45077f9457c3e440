"""bitexact's flash-attention forward kernels (cuda/attention/flash_forward.cu,
FA2's structure, and flash_forward_wgmma.cu, Hopper's) from PyTorch, as the
custom operator ``torch.ops.bitexact.flash_forward``.

Swap it into a model with one line:

    import bitexact_flash
    F.scaled_dot_product_attention = bitexact_flash.scaled_dot_product_attention
    # or, the paper's stabilized softmax (across_blocks=True: also maxima
    # repeated in different K/V blocks):
    F.scaled_dot_product_attention = bitexact_flash.stabilized(beta=2.0, eps=1e-3)

The standard kernel gives the bits of PyTorch's flash backend on its
single-split path; the stabilized ones those of the emulator presets
pytorch_sdpa_flash_sm90_stabilized and pytorch_sdpa_flash_sm90_stabilized_across_blocks. bf16 CUDA
tensors [B, H, N, d] with d 64 or 128, no mask other than causal, no dropout.

Gradients: the backward pass is PyTorch's own flash backward
(aten._scaled_dot_product_flash_attention_backward) on the forward's O and L,
for every variant: the paper's fix changes the forward alone. With the standard
kernel the gradients are PyTorch's flash path's bits; dQ is accumulated with
atomics unless torch.use_deterministic_algorithms(True) is on, as in PyTorch.
L is returned for inspection and is not differentiable.

The shared library is the CMake target bitexact_flash_attention; this module
loads $BITEXACT_FLASH_LIBRARY, else build*/cuda/libbitexact_flash_attention.so
of the repository when it is not older than its sources, else compiles them
with nvcc once into ~/.cache/bitexact (named by the sources' hash, so an
edited kernel is compiled again). Importing it needs PyTorch;
nothing else in the project does.
"""
import ctypes
import glob
import hashlib
import math
import os
import subprocess

import torch

_here = os.path.dirname(os.path.abspath(__file__))


def _library_path():
    explicit = os.environ.get("BITEXACT_FLASH_LIBRARY")
    if explicit:
        return explicit
    sources = [os.path.join(_here, name) for name in ("flash_forward.cu", "flash_forward_wgmma.cu")]
    headers = sorted(glob.glob(os.path.join(_here, "*.cuh"))) + [os.path.join(_here, "..", "hopper.cuh")]
    # A CMake build of these very sources (not one older than them), else our own nvcc build of them.
    built = sorted(glob.glob(os.path.join(_here, "..", "..", "build*", "cuda", "libbitexact_flash_attention.so")))
    newest = max(os.path.getmtime(path) for path in sources + headers)
    fresh = [path for path in built if os.path.getmtime(path) >= newest]
    if fresh:
        return fresh[0]
    digest = hashlib.sha256(b"".join(open(path, "rb").read() for path in sources + headers)).hexdigest()[:16]
    cache = os.path.join(os.path.expanduser("~"), ".cache", "bitexact")
    path = os.path.join(cache, f"libbitexact_flash_attention_{digest}.so")
    if not os.path.exists(path):
        os.makedirs(cache, exist_ok=True)
        nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
        subprocess.run([nvcc, "-O3", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-Xcompiler", "-fPIC",
                        "-shared", *sources, "-o", path + ".part"], check=True)
        os.replace(path + ".part", path)
    return path


_lib = ctypes.CDLL(_library_path())
# The kernels' structures, by name: each has a forward and an indicator entry
# point with the same arguments (flash_api.cuh). Both give the same bits
# (cuda/attention/check_flash_forward.py); the custom operator, the swap and
# the indicator use the faster, wgmma (docs/performance.md).
STRUCTURES = {"fa2": "bitexact_flash_forward", "wgmma": "bitexact_flash_forward_wgmma"}
FASTEST = "wgmma"
for _entry in STRUCTURES.values():
    getattr(_lib, _entry).argtypes = ([ctypes.c_void_p] * 5 + [ctypes.c_int] * 5 + [ctypes.c_float] +
                                      [ctypes.c_int, ctypes.c_float, ctypes.c_float, ctypes.c_void_p])
    getattr(_lib, _entry).restype = ctypes.c_int
    getattr(_lib, _entry + "_indicator").argtypes = ([ctypes.c_void_p] * 5 + [ctypes.c_int] * 5 +
                                                     [ctypes.c_float, ctypes.c_float] + [ctypes.c_void_p] * 3)
    getattr(_lib, _entry + "_indicator").restype = ctypes.c_int


def _check(q, k, v):
    for name, t in (("query", q), ("key", k), ("value", v)):
        if t.dtype != torch.bfloat16 or not t.is_cuda or t.dim() != 4:
            raise ValueError(f"bitexact_flash: {name} must be a bf16 CUDA tensor [B, H, N, d]; got {t.dtype} "
                             f"on {t.device} with shape {tuple(t.shape)}")
    if q.shape[-1] not in (64, 128):
        raise ValueError(f"bitexact_flash: head dim {q.shape[-1]} (the kernels take 64 and 128)")
    if k.shape != v.shape or k.shape[:2] != q.shape[:2] or k.shape[-1] != q.shape[-1]:
        raise ValueError(f"bitexact_flash: key and value must be [B, H, N_k, d] with the query's B, H and d; got "
                         f"query {tuple(q.shape)}, key {tuple(k.shape)}, value {tuple(v.shape)}")
    if min(q.shape[2], k.shape[2]) < 1 or q.shape[0] * q.shape[1] > 65535:
        raise ValueError(f"bitexact_flash: needs N >= 1 and at most 65535 heads (B * H); got {tuple(q.shape)}")


def run_forward(structure, query, key, value, is_causal, scale, stabilize, beta, eps):
    """O and L of one forward pass on the kernel of this structure ("fa2" or
    "wgmma", STRUCTURES); the arguments as flash_forward's."""
    if stabilize not in (0, 1, 2):
        raise ValueError(f"bitexact_flash: stabilize is 0, 1 or 2, not {stabilize}")
    _check(query, key, value)
    q, k, v = (t.contiguous() for t in (query, key, value))
    B, H, N, d = q.shape
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device=q.device, dtype=torch.float32)
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream().cuda_stream
        rc = getattr(_lib, STRUCTURES[structure])(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(),
                                                  lse.data_ptr(), B * H, N, k.shape[2], d, int(is_causal), scale,
                                                  int(stabilize), beta, eps, stream)
    if rc != 0:
        raise RuntimeError(f"{STRUCTURES[structure]} returned {rc} (1: arguments refused, 2: launch failed)")
    return o, lse


@torch.library.custom_op("bitexact::flash_forward", mutates_args=())
def flash_forward(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, is_causal: bool, scale: float,
                  stabilize: int, beta: float, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """O (bf16, like query) and the log-sum-exp L (fp32 [B, H, N], natural
    log) of one forward pass, as torch.ops.aten._scaled_dot_product_flash_attention
    returns them; scale is the softmax scale the kernel receives (rounded to
    fp32); a causal mask with N != N_k is aligned to the bottom right, as
    flash-attention's. stabilize: 0 PyTorch's arithmetic, 1 the paper's
    Algorithm 3 in each K/V block, 2 the same rule across blocks; 1 and 2 need
    scale > 0 and eps finite."""
    return run_forward(FASTEST, query, key, value, is_causal, scale, stabilize, beta, eps)


@flash_forward.register_fake
def _(query, key, value, is_causal, scale, stabilize, beta, eps):
    B, H, N, _ = query.shape
    return torch.empty_like(query), query.new_empty((B, H, N), dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    query, key, value, is_causal, scale, _, _, _ = inputs
    o, lse = output
    ctx.save_for_backward(query, key, value, o, lse)
    ctx.is_causal, ctx.scale = is_causal, scale
    ctx.mark_non_differentiable(lse)


def _backward(ctx, grad_o, _grad_lse):
    q, k, v, o, lse = ctx.saved_tensors
    # Dense, no dropout: no cumulative lengths (undefined tensors, as the
    # flash forward returns them), and the RNG state is not read.
    dq, dk, dv = torch.ops.aten._scaled_dot_product_flash_attention_backward(
        grad_o.contiguous(), q.contiguous(), k.contiguous(), v.contiguous(), o, lse, None, None, q.shape[2],
        k.shape[2], 0.0, ctx.is_causal, None, None, scale=ctx.scale)
    return dq, dk, dv, None, None, None, None, None


flash_forward.register_autograd(_backward, setup_context=_setup_context)


def _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, stabilize, beta, eps):
    if attn_mask is not None or dropout_p != 0.0 or enable_gqa:
        raise NotImplementedError("bitexact_flash: no attn_mask, dropout or GQA (is_causal is the only mask)")
    if is_causal and query.shape[-2] != key.shape[-2]:
        # scaled_dot_product_attention aligns such a mask to the top left, the
        # kernels (as flash-attention) to the bottom right: refuse, not differ.
        raise NotImplementedError("bitexact_flash: is_causal with query and key lengths that differ (call "
                                  "flash_forward for flash-attention's bottom-right mask)")
    # PyTorch's default scale, as its flash backend receives it: 1/sqrt(d) in double, then float.
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    return flash_forward(query, key, value, is_causal, scale, stabilize, beta, eps)[0]


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """torch.nn.functional.scaled_dot_product_attention's signature, on the
    standard kernel: PyTorch's flash-backend bits (single-split path)."""
    return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, 0, 2.0, 1e-3)


def stabilized(beta=2.0, eps=1e-3, across_blocks=False):
    """scaled_dot_product_attention on a stabilized kernel: the paper's
    Algorithm 3 with these beta and eps in each K/V block, or across blocks."""
    rule = 2 if across_blocks else 1

    def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        return _attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, rule, beta, eps)
    return attention


def flash_forward_with_indicator(query, key, value, is_causal=False, scale=None, eps=1e-3, structure=FASTEST):
    """The standard kernel's O and L (PyTorch's flash bits, single-split path)
    and, from the same pass, the leading indicator of docs/bias.md per query
    row, as int32 [B, H, N]: p_bar_ones, the keys whose bf16 P-bar is exactly
    1 as P V takes them, and max_repeated, 1 where the row's two largest scores
    pass the paper's tie test RN(RN(max - s) * scale) <= eps. Per head, the
    training-loop counts are (p_bar_ones >= 2).sum(-1) and max_repeated.sum(-1)."""
    _check(query, key, value)
    q, k, v = (t.contiguous() for t in (query, key, value))
    B, H, N, d = q.shape
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    o = torch.empty_like(q)
    lse = torch.empty(B, H, N, device=q.device, dtype=torch.float32)
    p_bar_ones, max_repeated = (torch.empty(B, H, N, device=q.device, dtype=torch.int32) for _ in range(2))
    with torch.cuda.device(q.device):
        stream = torch.cuda.current_stream().cuda_stream
        entry = STRUCTURES[structure] + "_indicator"
        rc = getattr(_lib, entry)(q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), lse.data_ptr(), B * H, N,
                                  k.shape[2], d, int(is_causal), scale, eps, p_bar_ones.data_ptr(),
                                  max_repeated.data_ptr(), stream)
    if rc != 0:
        raise RuntimeError(f"{entry} returned {rc} (1: arguments refused, 2: launch failed)")
    return o, lse, p_bar_ones, max_repeated
