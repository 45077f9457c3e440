#!/usr/bin/env python3
"""bitexact.torch's operators on the device machine, as a training loop uses them:

- gradients: the standard kernel's O, dQ, dK and dV against PyTorch's flash path (F.scaled_dot_product_attention
  under sdpa_kernel(FLASH_ATTENTION)), bit for bit, with torch.use_deterministic_algorithms(True) (dQ is
  accumulated with atomics otherwise, in both); the stabilized kernels' gradients against PyTorch's math
  backend in float64, with PyTorch flash's own error beside them;
- layouts: the views a model hands over ([B, N, H, d] transposed, slices of a packed QKV, padded rows), O and L
  against PyTorch's flash on the same views, and the CUDA kernels each call launches (our forward alone where
  the kernels read the layout, so no copy);
- grouped-query attention (enable_gqa, 2 and 8 query heads a K/V head): O and gradients against PyTorch flash's;
- our FP8 kernel's V^T (fp8_value_layout) of contiguous, transposed and unaligned views against the permutation;
- our FP8 kernel against the emulator (bitexact.attention, its presets) where the arithmetic is at its edges:
  NaN bytes in Q, K and V (the standard kernel's P-bar as an exponent add, p_exponent_of), and descales large
  enough that P overflows (the FMUL again);
- a model's attention layer (packed QKV projection, the swap, the output projection) eager, under
  torch.compile(fullgraph=True) and captured in a CUDA graph: the weights' gradients against PyTorch flash's;
- bad input refused with one line.

    PYTHONPATH=build/python python3 cuda/attention/check_torch_operators.py
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import bitexact.torch as bitexact_torch  # noqa: E402 (PYTHONPATH=build/python, or pip install)

torch.use_deterministic_algorithms(True)
generator = torch.Generator(device="cuda").manual_seed(20)
failures = []


def inputs(b, h, n, d, ties=False):
    """Random bf16 Q, K, V, heads enough (B H ceil(N / 128) >= 0.8 x 132) for
    PyTorch's single-split flash kernel. ties: every 5th key copies key 0 and
    every 9th query is 3 times key 0, so those rows' maximum repeats (where the
    stabilized kernels differ from the standard one)."""
    q, k, v = (torch.randn(b, h, n, d, device="cuda", generator=generator).bfloat16() for _ in range(3))
    if ties:
        k[:, :, 5::5] = k[:, :, 0:1]
        q[:, :, ::9] = (3 * k[:, :, 0:1].float()).bfloat16()
    return [t.requires_grad_() for t in (q, k, v)]


def grads(attention, q, k, v, do, causal):
    for t in (q, k, v):
        t.grad = None
    o = attention(q, k, v, is_causal=causal)
    o.backward(do)
    return [o.detach()] + [t.grad.detach().clone() for t in (q, k, v)]


def pytorch_flash(q, k, v, is_causal):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


def reference(q, k, v, do, causal):
    """float64 math backend: O and the gradients."""
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    with sdpa_kernel([SDPBackend.MATH]):
        o = F.scaled_dot_product_attention(q64, k64, v64, is_causal=causal)
    o.backward(do.double())
    return [o.detach()] + [t.grad for t in (q64, k64, v64)]


def check(name, ok, detail):
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    if not ok:
        failures.append(name)


for b, h, n, d, ties in ((4, 8, 1000, 64, False), (4, 8, 1024, 128, False), (8, 16, 512, 64, False),
                         (4, 8, 1000, 64, True), (4, 8, 1024, 128, True)):
    for causal in (False, True):
        q, k, v = inputs(b, h, n, d, ties)
        do = torch.randn(b, h, n, d, device="cuda", generator=generator).bfloat16()
        label = f"B{b} H{h} N{n} d{d}{' causal' if causal else ''}{' ties' if ties else ''}"
        ours = grads(bitexact_torch.scaled_dot_product_attention, q, k, v, do, causal)
        theirs = grads(pytorch_flash, q, k, v, do, causal)
        again = grads(pytorch_flash, q, k, v, do, causal)
        names = ("O", "dQ", "dK", "dV")
        differ = [int((a.view(torch.int16) != c.view(torch.int16)).sum()) for a, c in zip(ours, theirs)]
        repeat = [int((a.view(torch.int16) != c.view(torch.int16)).sum()) for a, c in zip(theirs, again)]
        check(f"standard = PyTorch flash, {label}", sum(differ) == 0,
              f"{4 * q.numel()} elements (O, dQ, dK, dV), differing " + ", ".join(f"{x} {c}" for x, c in zip(names, differ)) +
              f"; PyTorch flash run twice differs in {sum(repeat)}")
        ref = reference(q, k, v, do, causal)
        flash_err = [float((t.double() - r).abs().max()) for t, r in zip(theirs, ref)]
        for variant, attention in (("stabilized", bitexact_torch.stabilized()),
                                   ("stabilized across blocks", bitexact_torch.stabilized(across_blocks=True))):
            got = grads(attention, q, k, v, do, causal)
            err = [float((t.double() - r).abs().max()) for t, r in zip(got, ref)]
            changed = sum(int((a.view(torch.int16) != c.view(torch.int16)).sum()) for a, c in zip(got, ours))
            # The usual bf16 bound: no more than twice PyTorch flash's own error, plus one bf16 ulp at 1.
            ok = all(e <= 2 * f + 2 ** -8 for e, f in zip(err, flash_err))
            check(f"{variant} vs float64 math, {label}", ok,
                  "max |error| " + ", ".join(f"{x} {e:.3g} (flash {f:.3g})" for x, e, f in zip(names, err, flash_err)) +
                  f"; {changed} of {4 * q.numel()} elements differ from the standard kernel's")

# The one-line swap under torch.compile: the same bits as eager.
q, k, v = inputs(4, 8, 1024, 64)
do = torch.randn_like(q).detach()
eager = grads(bitexact_torch.scaled_dot_product_attention, q, k, v, do, True)
original = F.scaled_dot_product_attention
F.scaled_dot_product_attention = bitexact_torch.scaled_dot_product_attention


def layer(q, k, v, is_causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


compiled = grads(torch.compile(layer, fullgraph=True), q, k, v, do, True)
F.scaled_dot_product_attention = original
same = all(torch.equal(a.view(torch.int16), c.view(torch.int16)) for a, c in zip(eager, compiled))
check("torch.compile(fullgraph) of the swapped F.scaled_dot_product_attention = eager", same,
      f"{4 * q.numel()} elements")
lse = bitexact_torch.flash_forward(q, k, v, True, 0.125, 0, 2.0, 1e-3)[1]
check("L is not differentiable", not lse.requires_grad, f"requires_grad {lse.requires_grad}")


def differing(a, b):
    view = torch.int16 if a.dtype == torch.bfloat16 else torch.int32
    return int((a.view(view) != b.view(view)).sum())


def cuda_kernels(call):
    """The names of the CUDA kernels one call launches."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
        call()
        torch.cuda.synchronize()
    return [e.name for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def layouts(b, h, n, d):
    """(name, q, k, v, read in place) for the views a model hands to scaled_dot_product_attention."""
    def normal(*shape):
        return torch.randn(*shape, device="cuda", generator=generator).bfloat16()
    packed = normal(b, n, 3, h, d)
    padded8, padded4 = normal(3, b, h, n, d + 8), normal(3, b, h, n, d + 4)
    return [("contiguous [B, H, N, d]", *(normal(b, h, n, d) for _ in range(3)), True),
            ("[B, N, H, d] transposed", *(normal(b, n, h, d).transpose(1, 2) for _ in range(3)), True),
            ("packed QKV [B, N, 3, H, d]", *(packed[:, :, i].transpose(1, 2) for i in range(3)), True),
            ("rows padded to d + 8", *(padded8[i, ..., :d] for i in range(3)), True),
            ("rows padded to d + 4 (copied)", *(padded4[i, ..., :d] for i in range(3)), False)]


# Enough heads for PyTorch's single-split kernel (B H ceil(N / 64) >= 0.8 x 2 x 132), the path ours reproduces.
for b, h, n, d in ((2, 8, 1000, 64), (2, 16, 512, 128)):
    for name, q, k, v, in_place in layouts(b, h, n, d):
        for causal in (False, True):
            # PyTorch's flash kernel on dense copies (the same values: the same bits); called directly, it
            # would read rows that are not 16-byte aligned (the d + 4 case) as if they were.
            theirs = torch.ops.aten._scaled_dot_product_flash_attention(q.contiguous(), k.contiguous(),
                                                                        v.contiguous(), 0.0, causal, False)[:2]
            ours = bitexact_torch.flash_forward(q, k, v, causal, d ** -0.5)
            launched = cuda_kernels(lambda: bitexact_torch.flash_forward(q, k, v, causal, d ** -0.5))
            # Deterministic mode fills the outputs' fresh memory (two elementwise kernels), PyTorch's too.
            copies = sum("copy" in x for x in launched)
            forwards = sum("flash_forward" in x for x in launched)
            bad = differing(ours[0], theirs[0]) + differing(ours[1], theirs[1])
            ok = bad == 0 and forwards == 1 and (copies == 0) == in_place
            check(f"layout {name}, B{b} H{h} N{n} d{d}{' causal' if causal else ''}", ok,
                  f"{ours[0].numel() + ours[1].numel()} O and L elements, mismatches {bad}; kernels launched "
                  f"{len(launched)}: our forward {forwards}, copies {copies}")

# Grouped-query attention: PyTorch's flash path takes enable_gqa; the same bits, gradients too.
for b, h, h_kv, n, d in ((2, 8, 4, 1000, 64), (2, 16, 2, 1024, 128)):
    for causal in (False, True):
        q = torch.randn(b, h, n, d, device="cuda", generator=generator).bfloat16().requires_grad_()
        k, v = (torch.randn(b, h_kv, n, d, device="cuda", generator=generator).bfloat16().requires_grad_()
                for _ in range(2))
        do = torch.randn(b, h, n, d, device="cuda", generator=generator).bfloat16()
        results = []
        for attention in (bitexact_torch.scaled_dot_product_attention, F.scaled_dot_product_attention):
            for t in (q, k, v):
                t.grad = None
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                o = attention(q, k, v, is_causal=causal, enable_gqa=True)
            o.backward(do)
            results.append([o.detach()] + [t.grad.clone() for t in (q, k, v)])
        bad = [differing(x, y) for x, y in zip(*results)]
        check(f"grouped-query attention H{h} H_kv{h_kv} N{n} d{d}{' causal' if causal else ''} = PyTorch flash", sum(bad) == 0,
              f"{sum(x.numel() for x in results[0])} elements (O, dQ, dK, dV), differing {bad}")


class AttentionLayer(torch.nn.Module):
    """A transformer's attention: one QKV projection viewed as [B, N, 3, H, d], the attention, the output
    projection; heads_kv < heads: grouped-query attention (K and V from their own projection)."""

    def __init__(self, width, heads, heads_kv, attention):
        super().__init__()
        self.heads, self.heads_kv, self.d, self.attention = heads, heads_kv, width // heads, attention
        self.q = torch.nn.Linear(width, width, bias=False)
        self.kv = torch.nn.Linear(width, 2 * heads_kv * self.d, bias=False)
        self.out = torch.nn.Linear(width, width, bias=False)

    def forward(self, x):
        b, n, _ = x.shape
        q = self.q(x).view(b, n, self.heads, self.d).transpose(1, 2)
        k, v = self.kv(x).view(b, n, 2, self.heads_kv, self.d).permute(2, 0, 3, 1, 4)
        o = self.attention(q, k, v, is_causal=True, enable_gqa=self.heads_kv != self.heads)
        return self.out(o.transpose(1, 2).reshape(b, n, -1))


def layer_gradients(attention, heads_kv, x, dy, wrap):
    torch.manual_seed(3)
    layer = AttentionLayer(1024, 16, heads_kv, attention).cuda().bfloat16()
    run = wrap(layer)
    y = run(x)
    y.backward(dy)
    return [y.detach()] + [p.grad for p in layer.parameters()]


def graphed(layer):
    """The layer's forward and backward captured in one CUDA graph; the returned call replays it."""
    static_x = torch.zeros(2, 2048, 1024, device="cuda", dtype=torch.bfloat16)
    static_dy = torch.zeros_like(static_x)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(2):
            layer(static_x).backward(static_dy)
    torch.cuda.current_stream().wait_stream(side)
    layer.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_y = layer(static_x)
        static_y.backward(static_dy)

    class Replay:
        def __call__(self, x):
            static_x.copy_(x)
            self.x = x
            return self

        def backward(self, dy):
            static_dy.copy_(dy)
            graph.replay()

        def detach(self):
            return static_y.detach()
    return Replay()


x = torch.randn(2, 2048, 1024, device="cuda", generator=generator).bfloat16()
dy = torch.randn(2, 2048, 1024, device="cuda", generator=generator).bfloat16()


def pytorch_sdpa(q, k, v, is_causal, enable_gqa):
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=enable_gqa)


for heads_kv in (16, 4):
    theirs = layer_gradients(pytorch_sdpa, heads_kv, x, dy, lambda layer: layer)
    for mode, wrap in (("eager", lambda layer: layer), ("torch.compile(fullgraph=True)", lambda layer: torch.compile(layer, fullgraph=True)),
                       ("a CUDA graph", graphed)):
        ours = layer_gradients(bitexact_torch.scaled_dot_product_attention, heads_kv, x, dy, wrap)
        bad = sum(differing(a, b_) for a, b_ in zip(ours, theirs))
        check(f"attention layer (H 16, H_kv {heads_kv}, N 2048, d 64) in {mode} = PyTorch flash eager", bad == 0,
              f"{sum(t.numel() for t in ours)} elements (output and weight gradients), mismatches {bad}")

# V^T for the FP8 kernel (fp8_value_layout): each view against the permutation written out here: contiguous V,
# the transposed [B, N, H, d] view, and rows one byte apart (no 16-byte alignment), N past the last 32 keys.
position = torch.arange(32, device="cuda")
permuted = 16 * (position // 16) + 8 * (position // 2 % 2) + 2 * (position // 4 % 4) + position % 2
for b, h, n, d in ((2, 3, 1000, 128), (1, 2, 257, 64), (2, 2, 4096, 128), (1, 1, 1, 16), (1, 2, 33, 48),
                   (3, 5, 777, 80), (1, 16, 16384, 128)):
    bytes_ = torch.randint(0, 256, (b, h, n, d), device="cuda", dtype=torch.uint8, generator=generator)
    columns = (n + 31) // 32 * 32
    padded = torch.zeros(b, h, columns, d, device="cuda", dtype=torch.uint8)
    padded[:, :, :n] = bytes_
    keys = (torch.arange(columns, device="cuda") // 32 * 32).view(-1, 32) + permuted
    expected = padded[:, :, keys.flatten()].transpose(2, 3)
    wide = torch.zeros(b, h, n, d + 1, device="cuda", dtype=torch.uint8)
    wide[..., 1:] = bytes_
    views = {"contiguous": bytes_, "[B, N, H, d] transposed": bytes_.transpose(1, 2).contiguous().transpose(1, 2),
             "rows d + 1 bytes apart": wide[..., 1:]}
    for name, view in views.items():
        got = torch.ops.bitexact.fp8_value_layout(view.view(torch.float8_e4m3fn))
        bad = int((got != expected).sum())
        check(f"fp8_value_layout of V {name} (B {b}, H {h}, N {n}, d {d}) = the permutation", bad == 0,
              f"{expected.numel()} bytes, mismatches {bad}")

# Our FP8 kernel at its arithmetic's edges, against the emulator bit for bit (O and L as bit patterns, NaN too):
# NaN bytes in Q, K and V, where the standard kernel's P-bar is P's bits plus 8 << 23 and a NaN P's P-bar -0
# (its row NaN all the same), and descales of 64 on Q and K with rows of 448, whose scores make P overflow
# to inf (|scale_log2| 448^2 d past 2^29: the FMUL).
import numpy as np  # noqa: E402

import bitexact  # noqa: E402 (the emulator, from the same install)

presets = {(0, False, False): "bitexact_flash_fp8_sm90", (1, False, False): "bitexact_flash_fp8_sm90_stabilized",
           (2, False, False): "bitexact_flash_fp8_sm90_stabilized_across_blocks",
           (0, True, False): "bitexact_flash_fp8_sm90_pv_fp32_add",
           (0, True, True): "bitexact_flash_fp8_sm90_pv_fp32_add_p_bar_sum"}
for edge in ("NaN bytes", "P overflows"):
    b, h, n, d = 1, 2, 300, 64
    q8, k8, v8 = (torch.randn(b, h, n, d, device="cuda", generator=generator).to(torch.float8_e4m3fn)
                  for _ in range(3))
    descale = 1.0
    if edge == "NaN bytes":
        for t, every in ((q8, 997), (k8, 1301), (v8, 1709)):
            t.view(torch.uint8).view(-1)[::every] = 0x7F
    else:
        descale = 64.0
        for t in (q8, k8):  # every 7th row all 448: |m c| about 2^33, so x reaches hundreds
            t.view(torch.uint8)[..., ::7, :] = 0x7E
    for causal in (False, True):
        for (rule, pv_fp32_add, p_bar_sum), preset in presets.items():
            o, lse, _, _ = bitexact_torch.flash_forward_fp8(q8, k8, v8, causal, d ** -0.5, descale, descale, 1.0, 256.0,
                                                             1.0 / 256, 1.0, rule, 2.0, 1e-3, False, pv_fp32_add,
                                                             p_bar_sum)
            want_o, want_lse = bitexact.attention(*(t.view(torch.uint8).cpu().numpy() for t in (q8, k8, v8)),
                                                  preset=preset, causal=causal, scale=d ** -0.5, descale_q=descale,
                                                  descale_k=descale, scale_s=256.0, descale_s=1.0 / 256)
            got_o = o.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
            got_lse = lse.view(torch.int32).cpu().numpy().view(np.uint32)
            bad = int((got_o != want_o).sum()) + int((got_lse != want_lse.view(np.uint32)).sum())
            check(f"fp8 {preset}, {edge}, {'causal' if causal else 'not causal'}: O and L = the emulator's",
                  bad == 0, f"{got_o.size + got_lse.size} compared, {bad} differ; the emulator's O has "
                            f"{int(((want_o & 0x7FFF) > 0x7F80).sum())} NaN, its L {int(np.isinf(want_lse.view(np.float32)).sum())} inf")

# Bad input: one line each, never a result.
q = torch.randn(1, 2, 64, 64, device="cuda", dtype=torch.bfloat16)
q8 = q.to(torch.float8_e4m3fn)
refusals = {
    "fp16 inputs": lambda: bitexact_torch.scaled_dot_product_attention(q.half(), q.half(), q.half()),
    "head dim 96": lambda: bitexact_torch.scaled_dot_product_attention(
        *(torch.randn(1, 2, 64, 96, device="cuda", dtype=torch.bfloat16),) * 3),
    "a mask": lambda: bitexact_torch.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(64, 64, device="cuda", dtype=torch.bool)),
    "dropout": lambda: bitexact_torch.scaled_dot_product_attention(q, q, q, dropout_p=0.1),
    "causal, N != N_k": lambda: bitexact_torch.scaled_dot_product_attention(q[:, :, :32], q, q, is_causal=True),
    "fewer K/V heads without enable_gqa": lambda: bitexact_torch.scaled_dot_product_attention(q, q[:, :1], q[:, :1]),
    "K/V heads not dividing": lambda: bitexact_torch.scaled_dot_product_attention(torch.randn_like(q[:, :1]).expand(1, 3, 64, 64), q, q,
                                                                                      enable_gqa=True),
    "CPU tensors": lambda: bitexact_torch.scaled_dot_product_attention(q.cpu(), q.cpu(), q.cpu()),
    "stabilized, scale 0": lambda: bitexact_torch.stabilized()(q, q, q, scale=0.0),
    "structure 'fa3'": lambda: bitexact_torch.flash_forward(q, q, q, False, 0.125, 0, 2.0, 1e-3, "fa3"),
    "fp8 scale_s above 448 (the row max's P-bar would saturate)": lambda: bitexact_torch.flash_forward_fp8(
        q8, q8, q8, False, 0.125, scale_s=512.0, descale_s=1 / 512),
    "fp8 descale_v 0": lambda: bitexact_torch.flash_forward_fp8(q8, q8, q8, False, 0.125, descale_v=0.0),
    "fp8 p_bar_sum without pv_fp32_add": lambda: bitexact_torch.flash_forward_fp8(q8, q8, q8, False, 0.125,
                                                                                   p_bar_sum=True),
}
for name, call in refusals.items():
    try:
        call()
        torch.cuda.synchronize()
        check(f"refused: {name}", False, "it ran")
    except (ValueError, NotImplementedError, RuntimeError) as error:
        line = str(error).splitlines()[0]
        check(f"refused: {name}", line.startswith("bitexact"), f"{type(error).__name__}: {line}")
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
