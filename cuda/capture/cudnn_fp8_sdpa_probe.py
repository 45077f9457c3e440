#!/usr/bin/env python3
"""Probes cuDNN's FP8 (e4m3) scaled-dot-product attention forward, the path Transformer Engine takes on
Hopper (cudnn-frontend's graph.sdpa_fp8), for issue 33 item 3: does it run on this GPU, which engine and
kernel serve it, what O's type is, and what it computes, as data for a later description.

cudnn-frontend is not installed on the device machine: carry its wheel (README of the device tool) and put
it on the path first, then, from the repository root:

    python3 cuda/capture/cudnn_fp8_sdpa_probe.py OUTDIR            # every case
    python3 cuda/capture/cudnn_fp8_sdpa_probe.py OUTDIR --once     # one call of the first case (for ncu)

Cases: B 1, H 2, N 256, d 128 and 64, causal and not, Q K V e4m3 with per-tensor descales from their amax
(as Transformer Engine sets them), scale_s 448 (the bound cudnn-frontend's docs give for E4M3 without
dropout); plus "identity V" cases (V[j, c] = 1 for j = c, else 0, so O shows P's first d columns) with
power-of-two scale_s and scale_o, to read P's e4m3 conversion through O; plus the d 128 case with each
attention_implementation (AUTO, COMPOSITE, UNIFIED) and with O requested in bf16. Each graph runs twice
into output buffers filled with 0xFF first (bits compared). Inputs come from NumPy with fixed seeds.

PROBE_N (default 256) sets N: above 256 the kernel walks several blocks of 256 keys, so the online-softmax
rescaling shows (the seeds stay, so N 256's inputs are not a prefix of N 1024's). PROBE_CASES, a
comma-separated list of case names, runs only those.

OUTDIR gets probe.npz (per case: q, k, v, o as bit patterns, uint8 e4m3 or uint16 bf16; stats float32
[B, H, N]; amax_s, amax_o, the six scale factors float32) and facts.json (versions, per case: the
plan names, the selected engine, the kernels torch.profiler saw with their grids, O's type, whether the
two runs agree, or the exact error when the frontend refused).
"""
import json
import math
import os
import sys
import tempfile
import traceback

import numpy as np
import torch

import cudnn

B, H = 1, 2
N = int(os.environ.get("PROBE_N", "256"))  # keys (and queries); the kernel takes 256 keys a block
CASES = os.environ.get("PROBE_CASES")  # comma-separated case names to run; all when unset
E4M3_MAX = 448.0
FP8, FP32 = cudnn.data_type.FP8_E4M3, cudnn.data_type.FLOAT


def e4m3_from(x32):
    """x32 (float32, within +-448) rounded to e4m3 by PyTorch's conversion (nearest even)."""
    return torch.from_numpy(np.ascontiguousarray(x32, dtype=np.float32)).to(torch.float8_e4m3fn)


def per_tensor(x32):
    """Transformer Engine's per-tensor recipe: scale = 448 / amax, the e4m3 tensor of x * scale and the
    descale 1 / scale the attention multiplies back."""
    scale = np.float32(E4M3_MAX / np.abs(x32).max())
    return e4m3_from(x32 * scale), np.float32(1.0) / scale


def random_case(name, d, causal, seed, **extra):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((B, H, N, d)).astype(np.float32) for _ in range(3))
    (q8, dq), (k8, dk), (v8, dv) = per_tensor(q), per_tensor(k), per_tensor(v)
    # |O| <= max |V| dequantized, so this scale_o keeps O * scale_o inside e4m3's range.
    scale_o = np.float32(E4M3_MAX / (np.abs(v8.float().numpy()).max() * dv))
    scales = dict(descale_q=dq, descale_k=dk, descale_v=dv, descale_s=np.float32(1 / E4M3_MAX),
                  scale_s=np.float32(E4M3_MAX), scale_o=scale_o)
    return dict(name=name, d=d, causal=causal, seed=seed, q=q8, k=k8, v=v8, scales=scales, **extra)


def identity_v_case(name, d, causal, seed, scale_s, scale_o):
    """V's first d rows the identity, the rest zero: O[i, c] = P[i, c] * descale_s * scale_o when P is
    normalized before its e4m3 conversion, so O exposes P's conversion column by column."""
    rng = np.random.default_rng(seed)
    q, k = (rng.standard_normal((B, H, N, d)).astype(np.float32) for _ in range(2))
    (q8, dq), (k8, dk) = per_tensor(q), per_tensor(k)
    v = np.zeros((B, H, N, d), np.float32)
    v[:, :, np.arange(d), np.arange(d)] = 1.0
    scales = dict(descale_q=dq, descale_k=dk, descale_v=np.float32(1), descale_s=np.float32(1 / scale_s),
                  scale_s=np.float32(scale_s), scale_o=np.float32(scale_o))
    return dict(name=name, d=d, causal=causal, seed=seed, q=q8, k=k8, v=e4m3_from(v), scales=scales)


def cases():
    out = []
    for d in (128, 64):
        for causal in (False, True):
            out.append(random_case(f"d{d}_{'causal' if causal else 'full'}", d, causal, 3300 + len(out)))
    base = out[0]
    for impl in ("COMPOSITE", "UNIFIED"):
        out.append(dict(base, name=f"{base['name']}_impl_{impl.lower()}", implementation=impl))
    out.append(dict(base, name=f"{base['name']}_o_bf16", o_dtype="bf16"))
    out.append(dict(base, name=f"{base['name']}_scale_s_1", scales=dict(base["scales"], scale_s=np.float32(1),
                                                                        descale_s=np.float32(1))))
    for causal in (False, True):
        out.append(identity_v_case(f"idv_d128_{'causal' if causal else 'full'}", 128, causal, 3400 + len(out),
                                   scale_s=256.0, scale_o=1024.0))
    if CASES:
        wanted = CASES.split(",")
        out = [case for case in out if case["name"] in wanted]
    return out


def build_graph(case, handle):
    """The graph Transformer Engine builds for its FP8 forward: Q K V e4m3 [B, H, N, d] (BHSD strides),
    six float32 scalars, O, Stats [B, H, N, 1] float32, amax_s and amax_o as outputs."""
    graph = cudnn.pygraph(io_data_type=FP8, intermediate_data_type=FP32, compute_data_type=FP32, handle=handle)
    d = case["d"]
    dims, strides = [B, H, N, d], [H * N * d, N * d, d, 1]
    q, k, v = (graph.tensor(name=x, dim=dims, stride=strides, data_type=FP8) for x in ("q", "k", "v"))
    scalars = {x: graph.tensor(name=x, dim=[1, 1, 1, 1], stride=[1, 1, 1, 1], data_type=FP32)
               for x in case["scales"]}
    options = dict(generate_stats=True, attn_scale=1.0 / math.sqrt(d), name="sdpa_fp8")
    if case["causal"]:
        options.update(diagonal_alignment=cudnn.diagonal_alignment.TOP_LEFT, right_bound=0)
    if "implementation" in case:
        options["implementation"] = getattr(cudnn.attention_implementation, case["implementation"])
    o, stats, amax_s, amax_o = graph.sdpa_fp8(q, k, v, scalars["descale_q"], scalars["descale_k"],
                                              scalars["descale_v"], scalars["descale_s"], scalars["scale_s"],
                                              scalars["scale_o"], **options)
    o_type = cudnn.data_type.BFLOAT16 if case.get("o_dtype") == "bf16" else FP8
    o.set_output(True).set_dim(dims).set_stride(strides).set_data_type(o_type)
    stats.set_output(True).set_dim([B, H, N, 1]).set_stride([H * N, N, 1, 1]).set_data_type(FP32)
    for amax in (amax_s, amax_o):
        amax.set_output(True).set_dim([1, 1, 1, 1]).set_stride([1, 1, 1, 1]).set_data_type(FP32)
    graph.validate()
    graph.build_operation_graph()
    graph.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    graph.check_support()
    graph.build_plans()
    return graph, dict(q=q, k=k, v=v, o=o, stats=stats, amax_s=amax_s, amax_o=amax_o, **scalars)


def plan_facts(graph):
    count = graph.get_execution_plan_count()
    facts = dict(plan_count=count, plan_names=[], selected_index=getattr(graph, "_plan_index", None))
    for i in range(count):
        try:
            facts["plan_names"].append(graph.get_plan_name_at_index(i))
        except Exception as error:  # a plan the frontend cannot name still leaves the others
            facts["plan_names"].append(f"<{type(error).__name__}: {error}>")
    engine = graph.selected_engine
    facts["selected_engine"] = "cudnn backend" if engine is None else engine.name
    return facts


def device_buffers(case):
    d = case["d"]
    o_dtype = torch.bfloat16 if case.get("o_dtype") == "bf16" else torch.float8_e4m3fn
    buffers = dict(q=case["q"].cuda(), k=case["k"].cuda(), v=case["v"].cuda(),
                   o=torch.empty((B, H, N, d), dtype=o_dtype, device="cuda"),
                   stats=torch.empty((B, H, N, 1), dtype=torch.float32, device="cuda"),
                   amax_s=torch.empty((1, 1, 1, 1), dtype=torch.float32, device="cuda"),
                   amax_o=torch.empty((1, 1, 1, 1), dtype=torch.float32, device="cuda"))
    for name, value in case["scales"].items():
        buffers[name] = torch.from_numpy(np.full((1, 1, 1, 1), value, np.float32)).cuda()
    return buffers


def poison_outputs(buffers):
    """0xFF in every output byte (NaN in e4m3 and float32), so a value the kernel never wrote shows."""
    for name in ("o", "stats", "amax_s", "amax_o"):
        buffers[name].view(torch.uint8).fill_(0xFF)


def execute(graph, tensors, buffers, handle):
    workspace = torch.empty(max(graph.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    graph.execute({tensors[x]: buffers[x] for x in tensors}, workspace, handle=handle)
    torch.cuda.synchronize()


def kernels_of(call):
    """The kernels one call launched, as (name, grid, block), from torch.profiler's trace."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        call()
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        prof.export_chrome_trace(f.name)
        trace = json.load(open(f.name))
    events = sorted((e["ts"], e["name"], e.get("args", {}).get("grid"), e.get("args", {}).get("block"))
                    for e in trace["traceEvents"] if e.get("cat") == "kernel")
    return [dict(name=name, grid=grid, block=block) for _, name, grid, block in events]


def bits(tensor):
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32}[tensor.element_size()]
    array = tensor.contiguous().view(view).cpu().numpy()
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[tensor.element_size()])


def run_case(case, handle, arrays):
    """Builds and runs one case twice; its facts, or the exact error of the step that refused."""
    facts = dict(name=case["name"], d=case["d"], causal=case["causal"], seed=case["seed"],
                 implementation=case.get("implementation", "AUTO"), o_dtype_asked=case.get("o_dtype", "e4m3"),
                 scales={k: float(v) for k, v in case["scales"].items()})
    try:
        graph, tensors = build_graph(case, handle)
        facts.update(plan_facts(graph))
        buffers = device_buffers(case)
        poison_outputs(buffers)
        facts["kernels"] = kernels_of(lambda: execute(graph, tensors, buffers, handle))
        first = {x: bits(buffers[x]) for x in ("o", "stats", "amax_s", "amax_o")}
        poison_outputs(buffers)
        execute(graph, tensors, buffers, handle)
        second = {x: bits(buffers[x]) for x in first}
    except Exception as error:
        facts["error"] = f"{type(error).__name__}: {error}"
        facts["traceback"] = traceback.format_exc()
        print(case["name"], "FAILED:", facts["error"], flush=True)
        return facts
    facts["o_dtype"] = str(buffers["o"].dtype)
    facts["runs_identical"] = {x: bool(np.array_equal(first[x], second[x])) for x in first}
    facts["o_nan_count"] = int(torch.isnan(buffers["o"].float()).sum())
    facts["amax_s"] = float(buffers["amax_s"].item())
    facts["amax_o"] = float(buffers["amax_o"].item())
    prefix = case["name"] + "/"
    for x in ("q", "k", "v"):
        arrays[prefix + x] = bits(case[x])
    arrays[prefix + "o"] = first["o"]
    arrays[prefix + "stats"] = first["stats"].view(np.float32).reshape(B, H, N)
    for x in ("amax_s", "amax_o"):
        arrays[prefix + x] = first[x].view(np.float32).reshape(())
    for name, value in case["scales"].items():
        arrays[prefix + name] = np.float32(value)
    print(case["name"], facts["selected_engine"], [k["name"] for k in facts["kernels"]], facts["o_dtype"],
          facts["runs_identical"], "amax_s", facts["amax_s"], "amax_o", facts["amax_o"], flush=True)
    return facts


def versions():
    return dict(torch=torch.__version__, cuda=torch.version.cuda, torch_cudnn=torch.backends.cudnn.version(),
                frontend=cudnn.__version__, backend=cudnn.backend_version(),
                backend_string=cudnn.backend_version_string(), gpu=torch.cuda.get_device_name(),
                capability=list(torch.cuda.get_device_capability()))


def main():
    out = sys.argv[1] if len(sys.argv) in (2, 3) else sys.exit(__doc__)
    once = sys.argv[2:] == ["--once"]
    os.makedirs(out, exist_ok=True)
    handle = cudnn.create_handle()
    cudnn.set_stream(handle, torch.cuda.current_stream().cuda_stream)
    if once:  # one call, no torch kernels beside it, for Nsight Compute
        case = cases()[0]
        graph, tensors = build_graph(case, handle)
        buffers = device_buffers(case)
        execute(graph, tensors, buffers, handle)
        return
    facts = dict(versions=versions(), layout="BHSD, strides [H*N*d, N*d, d, 1]", cases=[])
    print(facts["versions"], flush=True)
    arrays = {}
    for case in cases():
        facts["cases"].append(run_case(case, handle, arrays))
    np.savez_compressed(os.path.join(out, "probe.npz"), **arrays)
    json.dump(facts, open(os.path.join(out, "facts.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
