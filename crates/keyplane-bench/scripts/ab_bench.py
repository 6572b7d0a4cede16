#!/usr/bin/env python3
"""A/B of two keyplane-bench binaries: alternates OLD and NEW runs of
`keyplane-bench S --keys N --core --json` per structure and prints, per
metric, the range over the runs of each binary and the new/old ratio of
the medians (for *_ns lower is better, for *_per_s higher is better).

usage: ab_bench.py OLD_BIN NEW_BIN KEYS ROUNDS STRUCTURE...
"""
import json, subprocess, sys, statistics

old, new, keys, rounds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
structures = sys.argv[5:]
METRICS = ("lookup_ns", "batch_lookup_ns", "reader_lookup_ns", "reader_batch_lookup_ns",
           "build_s", "update_ops_per_s", "update_ops_per_s_control_only")

def run(binary, s):
    out = subprocess.run([binary, s, "--keys", keys, "--core", "--json"], capture_output=True, text=True,
                         timeout=900).stdout
    recs = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
    vals = {}
    for r in recs:
        if r.get("n") != int(float(keys.rstrip("MK")) * (1 << 20 if keys.endswith("M") else 1)) and "n" in r:
            pass
        for m in METRICS:
            if isinstance(r.get(m), (int, float)) and (m not in vals):
                vals[m] = float(r[m])
    return vals

rows = []
for s in structures:
    res = {"old": [], "new": []}
    for i in range(rounds):
        for tag, b in (("old", old), ("new", new)) if i % 2 == 0 else (("new", new), ("old", old)):
            res[tag].append(run(b, s))
    for m in METRICS:
        o = [r[m] for r in res["old"] if m in r]
        n = [r[m] for r in res["new"] if m in r]
        if not o or not n:
            continue
        ratio = statistics.median(n) / statistics.median(o)
        worse = ratio if not m.endswith("per_s") else 1 / ratio
        row = {"structure": s, "metric": m, "old": o, "new": n, "new_over_old": ratio, "slowdown": worse}
        rows.append(row)
        print(json.dumps(row), flush=True)
print("| structure | metric | old (range) | new (range) | new/old (median) |")
print("|---|---|---|---|---|")
for r in rows:
    f = lambda v: f"{min(v):.4g}–{max(v):.4g}"
    print(f"| {r['structure']} | {r['metric']} | {f(r['old'])} | {f(r['new'])} | {r['new_over_old']:.3f} |")
