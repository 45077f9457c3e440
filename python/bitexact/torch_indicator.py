"""The leading indicator (bitexact.repeated_max) in PyTorch float32 operations, for a training loop's GPU
tensors: the same counts from the same scores, vectorised over heads, rows and K/V blocks.

The kernel's steps, as attention/repeated_max.hpp replays them one row at a time, become tensor steps here:
the mask (keys past a row's diagonal or past the end are -inf), each K/V block's max (NaN ignored, as the
kernel's FMNMX does), the stabilized rule on it, the running max of each split from its last block to its
first (a reversed cummax), the exponent argument RN(RN(s * scale_log2) - RN(m * scale_log2)), and P-bar = 1
exactly when that argument lies in bitexact.p_bar_one_range(). Each float32 multiply and subtract is one
IEEE round-to-nearest operation on CPU and GPU alike, so the counts are the C++ function's (the tests compare
them). The kernel's parameters and the interval come from the C++ side once per call.
"""

import math
import struct

from . import _bitexact, _kernel_text

COUNTS = ("rows", "rows_with_max_repeated", "rows_with_p_bar_one_twice", "rows_with_p_bar_one_twice_at_final_max",
          "most_p_bar_ones_in_a_row")


def _float32(bits):
    """An fp32 bit pattern as the Python float of the same value."""
    return struct.unpack("<f", struct.pack("<I", bits))[0]


def repeated_max_torch(s, head_dim, *, preset=None, kernel=None, causal=False, scale=None, splits=None,
                       gpu=None, batch_heads=None, beta=None, eps=None, heads_per_chunk=None, per_row=False):
    """bitexact.repeated_max's counts for a float32 tensor s [B, H, N, N_k] or [N, N_k] (the raw scores
    Q K^T), as int64 tensors [B, H] (0-dim for one head) on s's device. heads_per_chunk bounds the memory:
    about six float32 copies of that many heads' scores live at once. The kernel (preset or kernel=) as
    bitexact.repeated_max takes it; the across-blocks rule is not vectorised here (it follows the two
    largest scores key by key): use bitexact.repeated_max for it."""
    import torch

    if s.dtype != torch.float32 or s.dim() not in (2, 4):
        raise ValueError(f"repeated_max_torch: expected float32 scores [B, H, N, N_k] or [N, N_k], got {s.dtype} {tuple(s.shape)}")
    lead = tuple(s.shape[:-2])
    batch, heads = lead if lead else (1, 1)
    n, n_k = s.shape[-2:]
    resolved = _bitexact._flash_kernel_parameters(preset, _kernel_text(kernel), batch, heads, n, n_k, head_dim,
                                                  causal, scale, splits, gpu,
                                                  None if batch_heads is None else tuple(batch_heads), beta)
    if resolved.get("across_blocks"):
        raise NotImplementedError("repeated_max_torch: the across-blocks rule is not vectorised; use bitexact.repeated_max")
    if not resolved["unfused_scale"]:
        raise NotImplementedError("repeated_max_torch: only the kernel's unfused scale (UNFUSE_FMA) is vectorised")
    device = s.device
    constant = lambda bits: torch.tensor(_float32(bits), dtype=torch.float32, device=device)  # noqa: E731
    lowest, highest = (constant(bits) for bits in _bitexact._p_bar_one_range())
    epsilon_bits = resolved["epsilon"] if "epsilon" in resolved else struct.unpack("<I", struct.pack("<f", 1e-3))[0]
    if eps is not None:
        epsilon_bits = struct.unpack("<I", struct.pack("<f", eps))[0]
    parameters = {
        "scale": constant(resolved["scale"]), "scale_log2": constant(resolved["scale_log2"]),
        "epsilon": constant(epsilon_bits), "beta": constant(resolved["beta"]) if "beta" in resolved else None,
        "lowest": lowest, "highest": highest, "block_n": resolved["block_n"], "splits": resolved["splits"],
    }
    flat = s.reshape(-1, n, n_k)
    chunk = heads_per_chunk or flat.shape[0]
    rows = [_rows_of(flat[first:first + chunk], causal, parameters) for first in range(0, flat.shape[0], chunk)]
    repeated, ones, ones_at_final = (torch.cat([r[i] for r in rows]) for i in range(3))
    result = {
        "rows": torch.full((flat.shape[0],), n, dtype=torch.int64, device=device),
        "rows_with_max_repeated": repeated.sum(-1),
        "rows_with_p_bar_one_twice": (ones >= 2).sum(-1),
        "rows_with_p_bar_one_twice_at_final_max": (ones_at_final >= 2).sum(-1),
        "most_p_bar_ones_in_a_row": ones.amax(-1),
    }
    result = {name: value.reshape(lead) for name, value in result.items()}
    if per_row:
        result.update({"row_max_repeated": repeated.reshape(lead + (n,)), "row_p_bar_ones": ones.reshape(lead + (n,)),
                       "row_p_bar_ones_at_final_max": ones_at_final.reshape(lead + (n,))})
    return result


def _rows_of(s, causal, k):
    """For scores [C, N, N_k]: per row (a) as bool, and the most P-bar = 1 in one split, all and at the final max."""
    import torch

    heads, n, n_k = s.shape
    block_n, splits = k["block_n"], k["splits"]
    key_blocks = math.ceil(n_k / block_n)
    per_split = math.ceil(key_blocks / splits)
    padded_keys = splits * per_split * block_n
    minus_infinity = torch.tensor(-math.inf, dtype=torch.float32, device=s.device)
    keys = torch.arange(padded_keys, device=s.device)
    visible = torch.full((n,), n_k, device=s.device)
    if causal:
        visible = torch.clamp(torch.arange(n, device=s.device) + 1 + n_k - n, max=n_k)
    hidden = keys[None, :] >= visible[:, None]  # [N, keys]: past the diagonal or the end
    scores = torch.full((heads, n, padded_keys), -math.inf, dtype=torch.float32, device=s.device)
    scores[..., :n_k] = s
    scores = torch.where(hidden, minus_infinity, scores)
    without_nan = torch.where(torch.isnan(scores), minus_infinity, scores)  # FMNMX: NaN loses to a number

    # (a): the stabilized rule's test RN(RN(max - s) * scale) <= epsilon against the row max.
    row_max = without_nan.amax(-1, keepdim=True)
    repeated = (((row_max - scores) * k["scale"]) <= k["epsilon"]).sum(-1) >= 2

    # (b): blocks [C, N, splits, blocks of a split, block_n], each split's blocks from the last to the first.
    blocks = scores.reshape(heads, n, splits, per_split, block_n)
    block_max = without_nan.reshape(blocks.shape).amax(-1)
    if k["beta"] is not None:
        ties = (((block_max[..., None] - blocks) * k["scale"]) <= k["epsilon"]).sum(-1)
        zero = torch.zeros((), dtype=torch.float32, device=s.device)
        adjusted = torch.where(block_max > 0, k["beta"] * block_max, torch.where(block_max < 0, zero, block_max))
        block_max = torch.where(ties > 1, adjusted, block_max)
    running_max = torch.flip(torch.cummax(torch.flip(block_max, (-1,)), -1).values, (-1,))
    max_scaled = torch.where(running_max == -math.inf, torch.zeros_like(running_max), running_max * k["scale_log2"])
    argument = blocks * k["scale_log2"] - max_scaled[..., None]
    ones_per_block = ((argument >= k["lowest"]) & (argument <= k["highest"])).sum(-1)  # [C, N, splits, blocks]
    at_final_max = running_max == running_max[..., :1]  # block 0 of a split runs last
    ones = ones_per_block.sum(-1).amax(-1)
    ones_at_final = (ones_per_block * at_final_max).sum(-1).amax(-1)
    return repeated, ones, ones_at_final
