#!/usr/bin/env python3
"""Plots a run of examples/train/train_gpt.py: the loss curves (three, five
with --fp8's runs), the stabilized and fp8 kernels' loss minus the standard one's (the standard kernel's minus
PyTorch flash's is 0 at every step when the bits agree), and the leading
indicator per step. Needs matplotlib.

    python3 examples/train/plot.py run.json OUT_PREFIX    # writes OUT_PREFIX.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    run = json.load(open(sys.argv[1]))
    runs, summary = run["runs"], run["summary"]
    steps = range(len(runs["standard"]["loss"]))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    for name, style in (("pytorch_flash", dict(color="black", lw=2.5, alpha=0.35)),
                        ("standard", dict(color="tab:blue", lw=1)), ("stabilized", dict(color="tab:red", lw=1)),
                        ("fp8_standard", dict(color="tab:green", lw=1)),  # --fp8 runs, when present
                        ("fp8_stabilized", dict(color="tab:orange", lw=1, ls="--"))):
        if name in runs:
            axes[0].plot(range(len(runs[name]["loss"])), runs[name]["loss"], label=name.replace("_", " ")
                         + (f" (stopped at step {runs[name]['stopped']['step']})" if "stopped" in runs[name] else ""),
                         **style)
    axes[0].set(title=f"loss, {summary['layers']} layers, width {summary['width']}, context {summary['context']}",
                xlabel="step", ylabel="cross-entropy (bytes)", ylim=(2.0, 3.5))
    axes[0].legend()
    same = [a - b for a, b in zip(runs["standard"]["loss"], runs["pytorch_flash"]["loss"])]
    apart = [a - b for a, b in zip(runs["stabilized"]["loss"], runs["standard"]["loss"])]
    axes[1].plot(steps, apart, color="tab:red", lw=1, label="stabilized - standard")
    axes[1].plot(steps, same, color="tab:blue", lw=1.5, label="standard - PyTorch flash (all 0)")
    for name, color in (("fp8_standard", "tab:green"), ("fp8_stabilized", "tab:orange")):
        if name in runs:
            apart_fp8 = [a - b for a, b in zip(runs[name]["loss"], runs["standard"]["loss"])]
            axes[1].plot(range(len(apart_fp8)), apart_fp8, color=color,
                         lw=1, label=f"{name.replace('_', ' ')} - standard")
    axes[1].axhline(0, color="gray", lw=0.5)
    axes[1].set(title="loss differences", xlabel="step")
    axes[1].legend()
    for name, color in (("standard", "tab:blue"), ("stabilized", "tab:red")):
        axes[2].plot(steps, runs[name]["p_bar_ones_rows"], color=color, lw=1, label=f"{name}: rows with P-bar = 1 twice")
        axes[2].plot(steps, runs[name]["max_repeated_rows"], color=color, lw=1, ls="--",
                     label=f"{name}: rows whose max repeats")
    axes[2].set(title="leading indicator, all layers", xlabel="step", yscale="log")
    axes[2].legend(fontsize=8)
    median = summary["median_step_ms"]
    fig.suptitle(f"{summary['gpu']}, torch {summary['torch']}: step time (median, interleaved) PyTorch flash "
                 f"{median['pytorch_flash']:.2f} ms, standard {median['standard']:.2f} ms, stabilized "
                 f"{median['stabilized']:.2f} ms; standard = PyTorch flash bit for bit: "
                 f"{summary['standard_equals_pytorch_flash_bitwise']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(sys.argv[2] + ".png", dpi=110)


if __name__ == "__main__":
    main()
