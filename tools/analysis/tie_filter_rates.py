#!/usr/bin/env python3
"""How often a cheap tie filter would send a warp of the stabilized kernel to
an exact path, on the data of cuda/attention/bench_flash_forward.py.

Algorithm 3 changes a K/V block's row maximum when two scores s pass
RN(RN(m - s) * scale) <= eps (m the block's row maximum). A kernel could test
that cheaply on the bf16 P-bar words it packs for P V anyway, and take an
exact path only where the test fires; this counts how often that would be:
rows whose maximum really repeats, rows a P-bar filter flags (two keys with
P-bar at or above the least a passing score can have, one bf16 ulp of
slack), and warps (32 rows, 16w.. and 16w + 64.. of a 128-row block, as
flash_forward.cu lays them out) holding either. S is computed in float64
and rounded to fp32, not by the tensor-core model, and exp2 is NumPy's: the
counts are rates, not bits. docs/performance.md quotes them. The bf16
roundings are the library's (the Python binding, docs/python.md).

    PYTHONPATH=build/python python3 tools/analysis/tie_filter_rates.py
"""
import bitexact
import numpy as np


def bf16(x):
    """fp32 values rounded to nearest-even bf16, returned as fp32."""
    return bitexact.to_float32(bitexact.from_float32(np.asarray(x, np.float32), "bf16"), "bf16")


def rates(d, key_block, rows=2048, keys=4096, eps=np.float32(1e-3), seed=1):
    rng = np.random.default_rng(seed)
    q = bf16(rng.standard_normal((rows, d)))
    k = bf16(rng.standard_normal((keys, d)))
    scores = (q.astype(np.float64) @ k.T.astype(np.float64)).astype(np.float32)
    scale = np.float32(1 / np.sqrt(d))
    scale_log2 = np.float32(float(scale) * np.log2(np.e))
    # warp[r]: the warp of the kernel that holds row r
    warp = (np.arange(rows) // 128) * 4 + (np.arange(rows) % 64) // 16
    running = np.full(rows, -np.inf, np.float32)
    repeated = flagged = warps_repeated = warps_flagged = 0
    blocks = keys // key_block
    for j in reversed(range(blocks)):  # the kernel's order, last block first
        s = scores[:, j * key_block:(j + 1) * key_block]
        m = s.max(1)
        running = np.maximum(running, m)
        passing = (m[:, None] - s) * scale <= eps  # fp32 operations: RN(RN(m - s) * scale)
        exact = passing.sum(1) >= 2
        p_bar = bf16(np.exp2(s * scale_log2 - (running * scale_log2)[:, None]))
        least = bf16(np.exp2((m - eps / scale) * scale_log2 - running * scale_log2)) * np.float32(1 - 2**-8)
        filtered = (p_bar >= least[:, None]).sum(1) >= 2
        assert not (exact & ~filtered).any(), "the filter missed a repeated maximum"
        repeated += exact.sum()
        flagged += filtered.sum()
        warps_repeated += np.unique(warp[exact]).size
        warps_flagged += np.unique(warp[filtered]).size
    row_blocks, warp_blocks = rows * blocks, (rows // 32) * blocks
    print(f"d {d} (K/V blocks of {key_block}, N {keys}, {rows} rows): {row_blocks} row-blocks, "
          f"maximum repeated in {repeated} ({100 * repeated / row_blocks:.2f}%), "
          f"flagged by the P-bar filter {flagged} ({100 * flagged / row_blocks:.2f}%); "
          f"{warp_blocks} warp-blocks, {warps_repeated} ({100 * warps_repeated / warp_blocks:.1f}%) with a repeated "
          f"maximum, {warps_flagged} ({100 * warps_flagged / warp_blocks:.1f}%) flagged")


if __name__ == "__main__":
    rates(64, 128)
    rates(128, 64)
