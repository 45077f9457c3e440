"""The synthetic attention heads of include/bitexact/testing/synthetic_heads.hpp,
written again from the description in docs/bias.md ("The generator"), in
vectorised uint64 arithmetic: NumPy (uint64) on the host, or torch (int64,
whose wrapping products and additions have the same bits) on the GPU. It must
give the C++ generator's bits; python/tests/test_synthetic_heads.py checks it
against `bitexact bias statistics --save-heads`.

    head = make_head(spec, seed, head_index)           # NumPy: dict of uint16 bf16 patterns
    q, k, v, d_o = make_head_torch(spec, seed, head_index, device)   # torch bf16 tensors

spec: dict(head_dim, keys, rows, tile, max_kind, placement, ties, v_mean), as the C++ head_spec.
"""
import numpy as np

MAX_GROUPS = 16
FIRST_NOISE_DIM = 2 + MAX_GROUPS
STREAM = dict(q=1, k=2, v=3, d_o=4, row_max=5, key_gap=6)
# The row maximum lambda of each kind: sign, lowest exponent, number of exponents.
MAX_RANGE = dict(positive=(1, 2, 3), small_positive=(1, -11, 4), negative=(-1, 2, 3), negative_near_zero=(-1, -11, 4))
MAX_KINDS = tuple(MAX_RANGE)
PLACEMENTS = ("one_block", "across_blocks", "sink")
GOLDEN = 0x9E3779B97F4A7C15
MIX1 = 0xBF58476D1CE4E5B9
MIX2 = 0x94D049BB133111EB


def tile_of(head_dim):
    """The K/V block of PyTorch's single-split flash kernel on sm_90, which the placements refer to."""
    return 128 if head_dim == 64 else 64


def group_count(spec):
    blocks = spec["keys"] // spec["tile"]
    t = spec["ties"]
    if spec["placement"] == "one_block":
        return min(MAX_GROUPS, blocks * (spec["tile"] // t))
    if spec["placement"] == "across_blocks":
        return min(MAX_GROUPS, spec["tile"] // -(-t // blocks))
    return 1


def tied_keys(spec):
    """[groups, ties] key indices of the tied keys."""
    blocks, tile, t = spec["keys"] // spec["tile"], spec["tile"], spec["ties"]
    g = np.arange(group_count(spec))[:, None]
    k = np.arange(t)[None, :]
    if spec["placement"] == "one_block":
        return (g % blocks) * tile + (g // blocks) * t + k
    if spec["placement"] == "across_blocks":
        per_block = -(-t // blocks)
        return ((g + k) % blocks) * tile + g * per_block + k // blocks
    return k + 0 * g


class _NumpyWords:
    """uint64 arithmetic on NumPy arrays."""
    def const(self, c, like=None):
        return np.uint64(c)

    def shr(self, x, s):
        return x >> np.uint64(s)

    def index(self, n):
        return np.arange(n, dtype=np.uint64)

    def to_float(self, x):
        return x.astype(np.float64)

    def ldexp(self, x, e):
        return np.ldexp(x, e.astype(np.int64))


class _TorchWords:
    """The same on torch int64 tensors: constants as their two's-complement value, logical shifts masked."""
    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    def const(self, c, like=None):
        return c - (1 << 64) if c >= 1 << 63 else c

    def shr(self, x, s):
        return (x >> s) & ((1 << (64 - s)) - 1)

    def index(self, n):
        return self.torch.arange(n, dtype=self.torch.int64, device=self.device)

    def to_float(self, x):
        return x.to(self.torch.float64)

    def ldexp(self, x, e):
        return self.torch.ldexp(x, e)


def _splitmix64(w, x):
    z = x + w.const(GOLDEN)
    z = (z ^ w.shr(z, 30)) * w.const(MIX1)
    z = (z ^ w.shr(z, 27)) * w.const(MIX2)
    return z ^ w.shr(z, 31)


def _splitmix64_int(x):
    """splitmix64 of one Python integer."""
    m = (1 << 64) - 1
    z = (x + GOLDEN) & m
    z = ((z ^ (z >> 30)) * MIX1) & m
    z = ((z ^ (z >> 27)) * MIX2) & m
    return z ^ (z >> 31)


def _draw(w, seed, head, stream, index):
    """splitmix64(splitmix64(seed) xor (head << 40 | stream << 32 | index)) for an array of indices."""
    key = _splitmix64_int(seed) ^ (head << 40 | STREAM[stream] << 32)
    return _splitmix64(w, index ^ w.const(key))


def _signed_byte(w, bits):
    """The top 8 bits minus 128, as float64."""
    return w.to_float(w.shr(bits, 56)) - 128.0


def _magnitude(w, bits, low_exponent, exponents):
    """(1 + k/128) 2^e: k the low 7 bits, e = low_exponent + ((bits >> 32) * exponents >> 32)."""
    k = w.to_float(bits & 127)
    e = w.to_float(w.shr(w.shr(bits, 32) * exponents, 32)) + low_exponent
    return w.ldexp(1.0 + k / 128.0, e)


def _head_values(w, spec, seed, head, xp):
    """Q, K, V, dO as float64 arrays (every value a bf16 exactly), and the row groups."""
    d, n, rows = spec["head_dim"], spec["keys"], spec["rows"]
    groups = group_count(spec)
    sign, low, count = MAX_RANGE[spec["max_kind"]]
    dims = xp.arange(d)
    row_index = w.index(rows)
    own = xp.arange(rows) % groups
    lam = sign * _magnitude(w, _draw(w, seed, head, "row_max", row_index), low, count)
    q_index = w.index(rows * d)
    q_noise = _signed_byte(w, _draw(w, seed, head, "q", q_index)) * 2.0 ** -10
    rho = -_magnitude(w, _draw(w, seed, head, "q", q_index), 3, 3)
    q_group = dims[None, :] - 2
    in_groups = (q_group >= 0) & (q_group < groups)
    q = xp.where((dims >= FIRST_NOISE_DIM)[None, :], q_noise.reshape(rows, d), 0.0)
    q = xp.where(in_groups & (q_group != own[:, None]), rho.reshape(rows, d), q)
    q[:, 0] = lam
    q[:, 1] = 1.0
    d_o = spec["v_mean"] + _signed_byte(w, _draw(w, seed, head, "d_o", q_index)).reshape(rows, d) * 2.0 ** -7

    group_of_key = np.full(n, -1)
    group_of_key[tied_keys(spec)] = np.arange(groups)[:, None]
    key_group = xp.asarray(group_of_key) if xp is np else xp.tensor(group_of_key, device=w.device)
    background = key_group < 0
    k_index = w.index(n * d)
    k_noise = _signed_byte(w, _draw(w, seed, head, "k", k_index)).reshape(n, d) * 2.0 ** -10
    gamma = -_magnitude(w, _draw(w, seed, head, "key_gap", w.index(n)), 3, 3)
    k = xp.where(background[:, None] & (dims >= FIRST_NOISE_DIM)[None, :], k_noise, 0.0)
    k = xp.where((dims[None, :] - 2 == key_group[:, None]) & ~background[:, None], 1.0, k)
    k[:, 0] = 1.0
    k[:, 1] = xp.where(background, gamma, 0.0)
    v = spec["v_mean"] + _signed_byte(w, _draw(w, seed, head, "v", k_index)).reshape(n, d) * 2.0 ** -7
    return q, k, v, d_o, own


def _check(spec):
    if spec["max_kind"] not in MAX_RANGE or spec["placement"] not in PLACEMENTS:
        raise ValueError(f"synthetic_heads: unknown max_kind or placement in {spec}")
    if spec["keys"] % spec["tile"] or not 1 <= spec["ties"] <= min(64, spec["tile"]):
        raise ValueError(f"synthetic_heads: keys must be a multiple of tile and ties 1..min(64, tile): {spec}")
    if spec["v_mean"] not in (-1, -0.5, 0, 0.5, 1):
        raise ValueError(f"synthetic_heads: v_mean must be -1, -0.5, 0, 0.5 or 1: {spec}")


def bf16_bits(x):
    """uint16 patterns of float64 values that are bf16 values exactly (asserted)."""
    single = np.asarray(x, np.float64).astype(np.float32)
    bits = single.view(np.uint32)
    assert not (bits & 0xFFFF).any() and (single.astype(np.float64) == x).all(), "a value is not a bf16"
    return (bits >> 16).astype(np.uint16)


def make_head(spec, seed, head):
    """One head in NumPy: q, k, v, d_o as uint16 bf16 patterns ([rows, d] or [keys, d]), group_of_row."""
    _check(spec)
    q, k, v, d_o, own = _head_values(_NumpyWords(), spec, seed, head, np)
    return dict(q=bf16_bits(q), k=bf16_bits(k), v=bf16_bits(v), d_o=bf16_bits(d_o), group_of_row=own)


def make_head_torch(spec, seed, head, device):
    """One head generated by torch on `device`: q, k, v, d_o as bf16 tensors, group_of_row (int64)."""
    import torch
    _check(spec)
    w = _TorchWords(torch, device)
    q, k, v, d_o, own = _head_values(w, spec, seed, head, _TorchNamespace(torch, device))
    return (*(x.to(torch.bfloat16) for x in (q, k, v, d_o)), own)


class _TorchNamespace:
    """The few NumPy-like functions _head_values calls, on torch."""
    def __init__(self, torch, device):
        self.torch, self.device = torch, device

    def arange(self, n):
        return self.torch.arange(n, device=self.device)

    def where(self, condition, a, b):
        t = self.torch
        as_tensor = (lambda x: x if isinstance(x, t.Tensor) else t.tensor(x, dtype=t.float64, device=self.device))
        return t.where(condition, as_tensor(a).to(t.float64), as_tensor(b).to(t.float64))

    def tensor(self, x, device):
        return self.torch.tensor(x, device=device)


def cells(head_dims, keys, maxima, placements, ties, v_means, rows):
    """The scenario cells in the C++ command's order (head dim, keys, maximum, placement, ties, V mean)."""
    out = []
    for d in head_dims:
        for n in keys:
            for m in maxima:
                for p in placements:
                    for t in ties:
                        for vm in v_means:
                            out.append(dict(head_dim=d, keys=n, rows=rows, tile=tile_of(d), max_kind=m, placement=p,
                                            ties=t, v_mean=vm))
    return out
