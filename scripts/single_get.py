#!/usr/bin/env python3
"""Interleaved single-lookup benchmark (issue #20): keyplane's `single_get`
example next to the C++ reference harnesses (docs/benchmarks.md,
"Reference harnesses"), all built once and kept running; each round sends one
line to each process in turn and collects its JSON lines.

usage: single_get.py N ROUNDS OUT.jsonl KEYPLANE_BIN HARNESS_DIR[:DIR...] [--queries Q] [--reps R]
       [--structures othello,othello_pow2,setsep] [--refs sdyy_othello,ludo_othello,ludo_setsep,libcuckoo,ludo_cuckoo]
       [--base OTHER_KEYPLANE_BIN --base-structures setsep] [--batch 16]
       (--structures may include cuckoo; each harness binary is looked up in the
       colon-separated HARNESS_DIR list; --base runs a second keyplane binary, e.g.
       the code before a change, in the same rotation, its JSON "impl" prefixed "base ")

--base-structures defaults to --structures. Every JSON line also records the process it came
from ("proc": keyplane, base or the reference's name).
"""
import os
import json, subprocess, sys, time

def main():
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    n, rounds, out, kp, hdir = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
    opts = dict(zip(sys.argv[6::2], sys.argv[7::2]))
    q, reps = opts.get("--queries", str(1 << 23)), opts.get("--reps", "5")
    nn = str(int(n.rstrip("M")) << 20) if n.endswith("M") else n
    def h(name):
        for d in hdir.split(":"):
            if os.path.exists(f"{d}/{name}"):
                return f"{d}/{name}"
        return f"{hdir.split(':')[0]}/{name}"
    cmds = {
        "keyplane": [kp, "--serve", "--n", nn, "--queries", q, "--reps", reps, "--structures", opts.get("--structures", "othello,othello_pow2,setsep")],
        "sdyy_othello": [h("othello_sdyy"), nn, q, reps],
        "ludo_othello": [h("othello_ludo"), nn, q, reps],
        "ludo_setsep": [h("setsep_ludo"), nn, q, reps],
        "libcuckoo": [h("libcuckoo_find"), nn, q, reps],
        "ludo_cuckoo": [h("ludo_cuckoo"), nn, q, reps],
    }
    if "--batch" in opts:
        # keys per batched call, keyplane binary only (older --base binaries lack the option)
        cmds["keyplane"] += ["--batch", opts["--batch"]]
    if "--base" in opts:
        bs = opts.get("--base-structures", opts.get("--structures", "othello,othello_pow2,setsep"))
        cmds["base"] = [opts["--base"], "--serve", "--n", nn, "--queries", q, "--reps", reps, "--structures", bs]
    refs = opts.get("--refs", "sdyy_othello,ludo_othello,ludo_setsep").split(",")
    cmds = {k: c for k, c in cmds.items() if k in ("keyplane", "base") or k in refs}
    expect = {"keyplane": len(opts.get("--structures", "othello,othello_pow2,setsep").split(",")),
              "base": len(opts.get("--base-structures", opts.get("--structures", "othello,othello_pow2,setsep")).split(","))}
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
                        d["proc"] = k
                        if k == "base":
                            d["impl"] = "base " + d["impl"]
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
