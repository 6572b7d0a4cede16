#!/usr/bin/env python3
"""Interleaved single-lookup benchmark (issue #20): keyplane's `single_get`
example next to the C++ reference harnesses (docs/benchmarks.md,
"Reference harnesses"), all built once and kept running; each round sends one
line to each process in turn and collects its JSON lines.

usage: single_get.py N ROUNDS OUT.jsonl KEYPLANE_BIN HARNESS_DIR [--queries Q] [--reps R]
       [--structures othello,othello_pow2,setsep] [--refs sdyy_othello,ludo_othello,ludo_setsep,libcuckoo,ludo_cuckoo]
       (--structures may include cuckoo; the harnesses are looked up in HARNESS_DIR)
"""
import json, subprocess, sys, time

def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    n, rounds, out, kp, hdir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    opts = dict(zip(sys.argv[6::2], sys.argv[7::2]))
    q, reps = opts.get("--queries", str(1 << 23)), opts.get("--reps", "5")
    nn = str(int(n.rstrip("M")) << 20) if n.endswith("M") else n
    cmds = {
        "keyplane": [kp, "--serve", "--n", nn, "--queries", q, "--reps", reps, "--structures", opts.get("--structures", "othello,othello_pow2,setsep")],
        "sdyy_othello": [f"{hdir}/othello_sdyy", nn, q, reps],
        "ludo_othello": [f"{hdir}/othello_ludo", nn, q, reps],
        "ludo_setsep": [f"{hdir}/setsep_ludo", nn, q, reps],
        "libcuckoo": [f"{hdir}/libcuckoo_find", nn, q, reps],
        "ludo_cuckoo": [f"{hdir}/ludo_cuckoo", nn, q, reps],
    }
    refs = opts.get("--refs", "sdyy_othello,ludo_othello,ludo_setsep").split(",")
    cmds = {k: c for k, c in cmds.items() if k == "keyplane" or k in refs}
    expect = {"keyplane": len(opts.get("--structures", "othello,othello_pow2,setsep").split(","))}
    procs = {k: subprocess.Popen(c, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, bufsize=1) for k, c in cmds.items()}
    with open(out, "a") as f:
        for r in range(rounds):
            order = list(procs) if r % 2 == 0 else list(reversed(procs))
            for k in order:
                p = procs[k]
                p.stdin.write("go\n")
                p.stdin.flush()
                got = 0
                while got < expect.get(k, 1):
                    line = p.stdout.readline()
                    if not line:
                        sys.exit(f"{k} exited")
                    if line.startswith('{"impl"'):
                        d = json.loads(line)
                        d["round"] = r
                        d["load_average_driver"] = float(open("/proc/loadavg").read().split()[0])
                        d["time"] = time.strftime("%H:%M:%S")
                        f.write(json.dumps(d) + "\n")
                        f.flush()
                        got += 1
                print(f"round {r} {k} done", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait()

main()
