#!/usr/bin/env python3
"""Summarises the net_pps rows of lb_service_bench (NET=1) as a markdown table
(ranges over repetitions) and, with --merge FILE, replaces the net_pps rows of
FILE (docs/bench/lb-service.json) with the new ones.

usage: lb_pps_table.py NET_JSON [--merge docs/bench/lb-service.json]
"""
import json
import sys


def rng(xs, fmt):
    lo, hi = min(xs), max(xs)
    return fmt(lo) if lo == hi else f"{fmt(lo)}–{fmt(hi)}"


def k(x):
    return f"{x / 1e3:.0f}K"


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    rows = [r for r in json.load(open(args[0])) if r.get("bench") == "net_pps"]
    if "--merge" in args:
        dst = args[args.index("--merge") + 1]
        old = [r for r in json.load(open(dst)) if r.get("bench") != "net_pps"]
        with open(dst, "w") as f:
            f.write("[\n" + ",\n".join(json.dumps(r) for r in old + rows) + "\n]\n")
    groups = {}
    for r in rows:
        groups.setdefault((r["frame_bytes"], r["vips"], r["lb"]), []).append(r)
    nft = {(s, v): g for (s, v, lb), g in groups.items() if lb == "nftables"}
    print("| frame | VIPs | LB | delivered pps | pps per forwarding core (LB) | pps per core (all-in) | all-in vs nftables | tracked |")
    print("|---|---|---|---|---|---|---|---|")
    for (s, v, lb), g in sorted(groups.items()):
        ratio = ""
        if (s, v) in nft and lb != "nftables":
            n = [x["pps_per_core_all_in"] for x in nft[(s, v)] if x["pps_per_core_all_in"] > 0]
            m = [x["pps_per_core_all_in"] for x in g if x["pps_per_core_all_in"] > 0]
            if n and m:
                ratio = f"{min(m) / max(n):.2f}–{max(m) / min(n):.2f}×"
        print(
            f"| {s} B | {v} | {lb} | {rng([x['pps'] for x in g], k)} | {rng([x['pps_per_core_lb'] for x in g], k)} "
            f"| {rng([x['pps_per_core_all_in'] for x in g], k)} | {ratio} | {rng([x['tracked'] for x in g], k)} |"
        )
    # Round by round (the same minutes): each LB's all-in rate over nftables'.
    reps = sorted({r["rep"] for r in rows})
    print(f"\n| frame | VIPs | LB | " + " | ".join(f"round {i + 1}" for i in reps) + " |")
    print("|---|---|---|" + "---|" * len(reps))
    for (s, v, lb), g in sorted(groups.items()):
        if lb == "nftables" or (s, v) not in nft:
            continue
        by = {x["rep"]: x["pps_per_core_all_in"] for x in nft[(s, v)]}
        cells = []
        for i in reps:
            m = [x["pps_per_core_all_in"] for x in g if x["rep"] == i]
            cells.append(f"{m[0] / by[i]:.2f}×" if m and by.get(i) else "")
        print(f"| {s} B | {v} | {lb} | " + " | ".join(cells) + " |")
    gens = sorted({r.get("gen", "af_packet") for r in rows})
    print(f"\ngenerator: {', '.join(gens)}")
    la = sorted({x["loadavg"].split()[0] for x in rows}, key=float)
    print(f"\nload average (1 min) during the runs: {la[0]}–{la[-1]}; runs per row: {max(len(g) for g in groups.values())}")


main()
