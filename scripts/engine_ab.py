#!/usr/bin/env python3
"""Before/after A/B of the per-structure benchmarks (issue #15's benchmark).

Runs two builds of `crates/keyplane/examples/engine_ab.rs` (one before a
change, one after) alternately, round by round (the order flips every round),
on the same structures and key counts, and compares medians of the thread CPU
time per operation. With `--callgrind` it also counts instructions per update
(control insert or remove + the delta applied to a lookup form) with
valgrind's callgrind: (run with U updates - run with 1) / (2 (U - 1)).

    cargo build --release -p keyplane --example engine_ab   # the "after" binary
    scripts/engine_ab.py --before BEFORE --after target/release/examples/engine_ab \\
        --keys 1000000 --rounds 5 --out docs/bench/engine-ab.jsonl [--callgrind]

With `ENGINE_AB_REPS=R` in the environment each lookup section runs R timed
passes in one process and reports its fastest (`best` in engine_ab.rs); the
summary then also gives, per figure, the ratio of the two binaries' fastest
rounds (`min_ratio`) next to the ratio of medians.

Every measured row goes to the JSONL output (one object per line: binary,
round, structure, keys, what, wall ns, cpu ns, the load average at the time);
the last lines are the summary: per (structure, keys, what) the before and
after medians and ranges of the CPU figure, the ratio after/before and
whether it is within 3 %; then the callgrind rows (instructions per update, and the instructions of
the whole run with one update: build and lookup passes at 64K keys).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ALL = ["othello", "ludo", "setsep", "cuckoo", "cuckoo-wide", "cuckoo-partial", "cfw", "bfw", "fht", "fpt"]
# Updates timed per run at 1M keys (SetSep's insert re-solves a group of
# keys and costs about a millisecond: fewer of them).
UPDATES = {"setsep": 2000}


def run(binary, keys, structure, updates):
    out = subprocess.run([binary, str(keys), structure, str(updates)], capture_output=True, text=True, check=True)
    return [json.loads(l) for l in out.stdout.splitlines() if l.startswith("{")]


def callgrind(binary, keys, structure, updates):
    counts = []
    for u in (1, updates):
        r = subprocess.run(
            ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", binary, str(keys), structure, str(u)],
            capture_output=True,
            text=True,
            check=True,
        )
        line = [l for l in r.stderr.splitlines() if "Collected :" in l][-1]
        counts.append(int(line.split()[-1]))
    return (counts[1] - counts[0]) / (2 * (updates - 1)), counts[0]


WHATS = ["get_ns", "batch_ns", "reader_ns", "reader_batch_ns", "get_u64_ns", "reader_u64_ns", "update_ns"]


def callgrind_sections(binary, keys, structure, updates, tmp):
    """Instructions of each timed section of one run, split by a callgrind dump
    before every clock_gettime call (Clock::start and per() call it twice each:
    Instant::now and the thread CPU clock). Counting back from the end, the
    sections are every fourth dump (per()'s pair, the untimed gap and start()'s
    pair lie between); the build is everything between the first start() and
    its per(), whatever clock calls the build itself makes. Returns
    {what: instructions per operation} (build_ms: instructions of the build)."""
    import glob
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--dump-before=*clock_gettime*",
            f"--callgrind-out-file={tmp}/cg.out",
            binary,
            str(keys),
            structure,
            str(updates),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    dumps = {}
    for f in glob.glob(f"{tmp}/cg.out.*"):
        with open(f) as fh:
            total = next(int(l.split()[1]) for l in fh if l.startswith("summary:"))
        dumps[int(f.rsplit(".", 1)[1])] = total
    shutil.rmtree(tmp, ignore_errors=True)
    m = max(dumps)
    ops = {w: keys for w in WHATS}
    ops["update_ns"] = 2 * updates
    out = {"build_ms": sum(dumps[i] for i in range(3, m - 28))}
    for j, w in enumerate(reversed(WHATS)):
        out[w] = dumps[m - 1 - 4 * j] / ops[w]
    return out


def summarize(rows, f):
    """Per (structure, keys, what): before/after medians and ranges of the CPU figure."""
    summary = {}
    for r in rows:
        summary.setdefault((r["structure"], r["keys"], r["what"]), {"before": [], "after": []})[r["binary"]].append(
            r["cpu"]
        )
    loads = [r["load1"] for r in rows]
    for (s, k, w), v in summary.items():
        if not v["before"] or not v["after"]:
            continue
        mb, ma = statistics.median(v["before"]), statistics.median(v["after"])
        row = {
            "summary": "cpu",
            "structure": s,
            "keys": k,
            "what": w,
            "before_median": round(mb, 2),
            "before_range": [round(min(v["before"]), 2), round(max(v["before"]), 2)],
            "after_median": round(ma, 2),
            "after_range": [round(min(v["after"]), 2), round(max(v["after"]), 2)],
            "ratio": round(ma / mb, 4) if mb else None,
            "min_ratio": round(min(v["after"]) / min(v["before"]), 4) if min(v["before"]) else None,
            "within_3pct": bool(mb) and ma <= 1.03 * mb,
            "rounds": min(len(v["after"]), len(v["before"])),
            "load1_range": [min(loads), max(loads)],
        }
        f.write(json.dumps(row) + "\n")
        print(json.dumps(row))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--keys", type=int, default=1_000_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument(
        "--first-round",
        type=int,
        default=0,
        help="number of the first round (a run continuing another: odd starts with the after binary)",
    )
    ap.add_argument("--structures", default=",".join(ALL))
    ap.add_argument("--updates", type=int, default=20_000, help="updates timed per run (SetSep: 2000)")
    ap.add_argument("--callgrind", action="store_true", help="also count instructions per update at 64K keys")
    ap.add_argument(
        "--callgrind-sections",
        type=int,
        metavar="KEYS",
        help="instead of timing: instructions per operation of every timed section "
        "(build, each lookup pass, updates) of both binaries under callgrind at KEYS keys",
    )
    ap.add_argument("--out", required=True)
    ap.add_argument(
        "--summarize",
        help="only summarise the measured rows of this JSONL file (e.g. of a run stopped early) into --out",
    )
    a = ap.parse_args()
    if a.summarize:
        rows = [r for r in map(json.loads, open(a.summarize)) if "binary" in r]
        with open(a.out, "a") as f:
            summarize(rows, f)
        return
    structures = a.structures.split(",")
    bins = {"before": a.before, "after": a.after}
    if a.callgrind_sections:
        n = a.callgrind_sections
        with open(a.out, "a") as f:
            for s in structures:
                u = min(UPDATES.get(s, a.updates), max(n // 10, 1))
                got = {b: callgrind_sections(bins[b], n, s, u, f"/tmp/engine_ab_cg.{os.getpid()}") for b in bins}
                for w in ["build_ms"] + WHATS:
                    ib, ia = got["before"][w], got["after"][w]
                    row = {
                        "summary": "callgrind_sections",
                        "structure": s,
                        "keys": n,
                        "updates": u,
                        "what": w.replace("_ms", "").replace("_ns", ""),
                        "before": round(ib, 1),
                        "after": round(ia, 1),
                        "ratio": round(ia / ib, 4) if ib else None,
                        "within_3pct": ia <= 1.03 * ib,
                    }
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    print(json.dumps(row), flush=True)
        return
    rows = []
    with open(a.out, "a") as f:
        for rnd in range(a.first_round, a.first_round + a.rounds):
            for s in structures:
                order = ["before", "after"] if (rnd % 2 == 0) else ["after", "before"]
                for b in order:
                    load = os.getloadavg()[0]
                    t0 = time.time()
                    for r in run(bins[b], a.keys, s, UPDATES.get(s, a.updates)):
                        r.update(binary=b, round=rnd, load1=round(load, 2))
                        rows.append(r)
                        f.write(json.dumps(r) + "\n")
                    f.flush()
                    print(f"round {rnd} {s} {b} {time.time() - t0:.1f}s load {load:.2f}", file=sys.stderr)
        summarize(rows, f)
        if a.callgrind:
            for s in structures:
                ib, fb = callgrind(a.before, 65536, s, 16385)
                ia, fa = callgrind(a.after, 65536, s, 16385)
                row = {
                    "summary": "callgrind",
                    "structure": s,
                    "keys": 65536,
                    "what": "instructions_per_update",
                    "before": round(ib, 1),
                    "after": round(ia, 1),
                    "ratio": round(ia / ib, 4),
                    "within_3pct": ia <= 1.03 * ib,
                    # The whole run with one update: build, seven lookup
                    # passes over the 64K keys (get, batch, reader, reader
                    # batch, get_u64 twice, plus the untimed warm-up pass).
                    "one_update_run_before": fb,
                    "one_update_run_after": fa,
                    "one_update_run_ratio": round(fa / fb, 4),
                }
                f.write(json.dumps(row) + "\n")
                print(json.dumps(row))


if __name__ == "__main__":
    main()
