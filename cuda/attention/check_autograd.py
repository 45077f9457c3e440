#!/usr/bin/env python3
"""Gradients through bitexact_flash on the device machine: the standard
kernel's O, dQ, dK and dV against PyTorch's flash path (F.scaled_dot_product_attention
under sdpa_kernel(FLASH_ATTENTION)), bit for bit, with
torch.use_deterministic_algorithms(True) (dQ is accumulated with atomics
otherwise, in both); the stabilized kernels' gradients against PyTorch's math
backend in float64, with PyTorch flash's own error beside them; the one-line
swap of F.scaled_dot_product_attention under torch.compile.

    python3 cuda/attention/check_autograd.py
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bitexact_flash  # noqa: E402

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
        ours = grads(bitexact_flash.scaled_dot_product_attention, q, k, v, do, causal)
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
        for variant, attention in (("stabilized", bitexact_flash.stabilized()),
                                   ("stabilized across blocks", bitexact_flash.stabilized(across_blocks=True))):
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
eager = grads(bitexact_flash.scaled_dot_product_attention, q, k, v, do, True)
original = F.scaled_dot_product_attention
F.scaled_dot_product_attention = bitexact_flash.scaled_dot_product_attention


def layer(q, k, v, is_causal):
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)


compiled = grads(torch.compile(layer, fullgraph=True), q, k, v, do, True)
F.scaled_dot_product_attention = original
same = all(torch.equal(a.view(torch.int16), c.view(torch.int16)) for a, c in zip(eager, compiled))
check("torch.compile(fullgraph) of the swapped F.scaled_dot_product_attention = eager", same,
      f"{4 * q.numel()} elements")
lse = bitexact_flash.flash_forward(q, k, v, True, 0.125, 0, 2.0, 1e-3)[1]
check("L is not differentiable", not lse.requires_grad, f"requires_grad {lse.requires_grad}")
print(f"{len(failures)} failures")
sys.exit(1 if failures else 0)
