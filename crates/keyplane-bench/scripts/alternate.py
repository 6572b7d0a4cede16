#!/usr/bin/env python3
"""Alternating A/B driver for single-lookup harnesses (docs/benchmarks.md).

Each command builds its table once, prints "ready" on stderr, then runs one
measurement round per line it reads on stdin and prints one JSON line. The
driver starts every command, then asks them in turn, ROUNDS times, so slow
phases of a loaded machine hit every binary alike. Output: one JSON object
{"load_avg": [...], "rounds": [[row, ...], ...]} on stdout.

usage: alternate.py ROUNDS -- CMD1 ARGS... -- CMD2 ARGS... [-- ...]
"""
import json
import os
import subprocess
import sys


def main():
    args = sys.argv[1:]
    rounds = int(args[0])
    cmds, cur = [], None
    for a in args[1:]:
        if a == "--":
            cur = []
            cmds.append(cur)
        else:
            cur.append(a)
    procs = []
    for c in cmds:
        p = subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while True:
            line = p.stderr.readline()
            if not line or "ready" in line:
                break
        procs.append(p)
    out = {"load_avg_start": os.getloadavg(), "rounds": []}
    for r in range(rounds):
        row = []
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
            row.append(json.loads(p.stdout.readline()))
        out["rounds"].append(row)
        print(json.dumps(row), file=sys.stderr)
    out["load_avg_end"] = os.getloadavg()
    for p in procs:
        p.stdin.close()
        p.wait()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
