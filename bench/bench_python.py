#!/usr/bin/env python3
"""Throughput of the Python module's elementwise operations on one core, against NumPy's
own float32 add measured in the same run (the baseline: the host's native add, with
NumPy's call and allocation overheads, as bitexact's calls have theirs).

    PYTHONPATH=build/python python3 bench/bench_python.py [--elements N] [--repeats R]

Prints each case's best time of R runs in million elements per second and as a ratio to
the baseline. The target: bf16 add at 100 M elements/s or more.
"""

import argparse
import os
import platform
import time

import numpy as np

import bitexact


def best_rate(run, elements, repeats):
    run()  # warm: page in the inputs, load what is loaded lazily
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return elements / best / 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--elements", type=int, default=1 << 24)
    parser.add_argument("--repeats", type=int, default=7)
    options = parser.parse_args()
    n = options.elements

    rng = np.random.default_rng(0)
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a, b = bitexact.from_float32(x, "bf16"), bitexact.from_float32(y, "bf16")
    x_bits, y_bits = x.view(np.uint32), y.view(np.uint32)
    draws = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32)

    cases = [
        ("numpy float32 add (baseline)", lambda: np.add(x, y)),
        ("bitexact bf16 add, nearest_even", lambda: bitexact.add(a, b, format="bf16")),
        ("bitexact bf16 mul, nearest_even", lambda: bitexact.mul(a, b, format="bf16")),
        ("bitexact fp32 add, nearest_even", lambda: bitexact.add(x_bits, y_bits, format="fp32")),
        ("bitexact bf16 add, per-element flags", lambda: bitexact.add(a, b, format="bf16", element_flags=True)),
        ("bitexact bf16 add, toward_zero", lambda: bitexact.add(a, b, format="bf16", rounding="toward_zero")),
        ("bitexact bf16 add, stochastic", lambda: bitexact.add(a, b, format="bf16", rounding="stochastic",
                                                               random_bits=draws)),
        ("bitexact fp32 -> bf16 convert", lambda: bitexact.convert(x_bits, format="fp32", result_format="bf16")),
    ]
    print(f"{n:,} elements, best of {options.repeats}; {platform.processor() or platform.machine()}, "
          f"NumPy {np.__version__}, one thread (bitexact's loops run on the calling thread; "
          f"os.cpu_count() = {os.cpu_count()})")
    baseline = None
    for name, run in cases:
        rate = best_rate(run, n, options.repeats)
        baseline = baseline or rate
        print(f"  {name:<40} {rate:9.1f} M elements/s   {rate / baseline:6.3f} x baseline")


if __name__ == "__main__":
    main()
