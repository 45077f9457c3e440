"""A flash-attention forward pass written in Triton, as a kernel author would
write one after Triton's fused-attention tutorial: the softmax scale folded
into the exponent (exp2 of score * scale * log2(e) minus the running max, in
log2 units), the accumulator rescaled in every K/V block, P rounded to bf16
for the P V product, and one division by the row sum at the end. L is written
in log2 units, as the tutorial's M.

It is the example of docs/unit-testing-kernels.md: its description,
examples/triton/flash_forward.json, tells bitexact how it rounds, and
examples/triton/test_flash_forward.py checks it bit for bit on a GPU.

    o, lse_log2 = flash_forward(q, k, v, causal=False, scale=None)

q [B, H, N_q, d], k and v [B, H, N_k, d], bf16 on a CUDA device, d 64 or 128;
causal is bottom-right aligned (row i sees keys j <= i + N_k - N_q).
"""
import math

import torch
import triton
import triton.language as tl

BLOCK_M = 128
BLOCK_N = 64


@triton.jit
def _flash_forward_kernel(Q, K, V, O, L, scale_log2, n_q, n_k, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr):
    row_block = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    rows = row_block * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_DIM)
    keys_in_block = tl.arange(0, BLOCK_N)
    q_head = Q + head * n_q * HEAD_DIM
    k_head = K + head * n_k * HEAD_DIM
    v_head = V + head * n_k * HEAD_DIM
    q = tl.load(q_head + rows[:, None] * HEAD_DIM + dims[None, :], mask=rows[:, None] < n_q, other=0.0)

    running_max = tl.full([BLOCK_M], float("-inf"), tl.float32)  # in log2 units
    row_sum = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    # Bottom-right causal mask: the last key a row sees is row + n_k - n_q.
    key_end = n_k
    if CAUSAL:
        key_end = tl.minimum(n_k, (row_block + 1) * BLOCK_M + n_k - n_q)
    for first_key in range(0, key_end, BLOCK_N):
        keys = first_key + keys_in_block
        k = tl.load(k_head + keys[None, :] * HEAD_DIM + dims[:, None], mask=keys[None, :] < n_k, other=0.0)
        scores = tl.dot(q, k)
        visible = keys[None, :] < n_k
        if CAUSAL:
            visible = visible & (keys[None, :] <= rows[:, None] + (n_k - n_q))
        scores = tl.where(visible, scores, float("-inf"))
        block_max = tl.maximum(running_max, tl.max(scores, 1) * scale_log2)
        # A row that has seen no key yet keeps its max at -inf; subtract 0 instead.
        shift = tl.where(block_max == float("-inf"), 0.0, block_max)
        p = tl.math.exp2(scores * scale_log2 - shift[:, None])
        alpha = tl.math.exp2(running_max - shift)
        row_sum = row_sum * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = tl.load(v_head + keys[:, None] * HEAD_DIM + dims[None, :], mask=keys[:, None] < n_k, other=0.0)
        acc = tl.dot(p.to(tl.bfloat16), v, acc)
        running_max = block_max

    divisor = tl.where(row_sum == 0.0, 1.0, row_sum)
    lse = running_max + tl.math.log2(divisor)
    acc = acc / divisor[:, None]
    o_head = O + head * n_q * HEAD_DIM
    tl.store(o_head + rows[:, None] * HEAD_DIM + dims[None, :], acc.to(tl.bfloat16), mask=rows[:, None] < n_q)
    tl.store(L + head * n_q + rows, lse, mask=rows < n_q)


def flash_forward(q, k, v, causal=False, scale=None):
    batch, heads, n_q, head_dim = q.shape
    n_k = k.shape[2]
    if head_dim not in (64, 128) or q.dtype != torch.bfloat16:
        raise ValueError("flash_forward takes bf16 tensors with head dim 64 or 128")
    if scale is None:
        scale = 1.0 / math.sqrt(head_dim)
    # The host computes the exponent's scale in double and passes it as a float argument.
    scale_log2 = scale * 1.4426950408889634
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty_like(q)
    lse = torch.empty(batch, heads, n_q, dtype=torch.float32, device=q.device)
    grid = (triton.cdiv(n_q, BLOCK_M), batch * heads)
    _flash_forward_kernel[grid](q, k, v, o, lse, scale_log2, n_q, n_k, HEAD_DIM=head_dim, BLOCK_M=BLOCK_M,
                                BLOCK_N=BLOCK_N, CAUSAL=causal, num_warps=4 if head_dim == 64 else 8, num_stages=2)
    return o, lse
