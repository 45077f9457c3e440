"""Compares a fresh capture (this GPU) with the committed H200 subsets: same inputs (seeded), so the
same rows/cols of d must hold the same bits. Usage: compare_captures.py WORKDIR COMMITTED [triton]"""
import json, os, sys
import numpy as np
work, committed = sys.argv[1], sys.argv[2]
triton = len(sys.argv) > 3
fresh = json.load(open(os.path.join(work, "manifest.json")))
old = {c["name"]: c for c in json.load(open(os.path.join(committed, "manifest.json")))["cases"]}
total = bad = cases = 0
for c in fresh["cases"]:
    name = c["name"]
    if name not in old or "error" in c:
        print(f"{name}: skipped ({c.get('error', 'not committed')})")
        continue
    o = old[name]
    files = ["d.npy"]
    if triton and o.get("all_configs"):
        files = [f"d_config{x['index']}.npy" for x in o["configs"]]
    for f in files:
        new = np.load(os.path.join(work, "cases", name, f))
        rows = list(range(new.shape[0])) if o["rows"] == "all" else o["rows"]
        cols = list(range(new.shape[1])) if o["cols"] == "all" else o["cols"]
        sub = new[np.ix_(rows, cols)]
        ref = np.load(os.path.join(committed, name, f))
        n = int((sub.view(np.uint8).reshape(sub.shape + (-1,)) != ref.view(np.uint8).reshape(ref.shape + (-1,))).any(-1).sum())
        total += ref.size
        bad += n
        kern = [k[0][:60] for k in c.get("kernels", [])] if not triton else c.get("config", "")
        okern = [k[0][:60] for k in o.get("kernels", [])] if not triton else o.get("config", "")
        same = "same kernels" if kern == okern else f"KERNELS DIFFER: {kern} vs {okern}"
        print(f"{name}/{f}: {ref.size} outputs, {n} differ from the H200 capture; {same}")
    cases += 1
print(f"TOTAL {cases} cases, {total} outputs compared with the H200 captures, {bad} differ")
