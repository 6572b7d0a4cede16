#!/bin/sh
# A/B of two builds of the lb_service_bench example (e.g. a copy of the old
# binary against the current one) on the lb-pps testbed: runs alternate
# A, B, A, B, ... PAIRS times (Concury AF_XDP and nftables in every run, as
# LBS says), each with REPS_NET=1, then prints per variant the ranges of the
# worker's and the generator CPU's softirq microseconds per delivered frame,
# the pps per core (LB, all-in) and all-in vs the same run's nftables.
# Usage (root): lb-pps-ab.sh BIN_A BIN_B [PAIRS=3]. About 55 s per run on
# 2 cores. Env: LBS (concury-af_xdp,nftables), NET_SECONDS (3), DIR
# (/tmp/lb-pps-ab; its earlier A-*.json / B-*.json are removed first).
set -eu
A=$1; B=$2; PAIRS=${3:-3}
DIR=${DIR:-/tmp/lb-pps-ab}
mkdir -p "$DIR"
rm -f "$DIR"/A-*.json "$DIR"/B-*.json
for i in $(seq 1 "$PAIRS"); do
    for v in A B; do
        if [ "$v" = A ]; then bin=$A; else bin=$B; fi
        NET=1 ONLY_NET=1 LBS=${LBS:-concury-af_xdp,nftables} NET_SECONDS=${NET_SECONDS:-3} REPS_NET=1 \
            OUT="$DIR/$v-$i.json" "$bin" >/dev/null
        echo "$v $i done, load $(cut -d' ' -f1-3 /proc/loadavg)"
    done
done
python3 - "$DIR" <<'PY'
import glob, json, sys
d = {}
for f in sorted(glob.glob(sys.argv[1] + "/[AB]-*.json")):
    v = f.rsplit("/", 1)[1].split("-")[0]
    rows = json.load(open(f))
    nft = {(r["frame_bytes"], r["vips"]): r["pps_per_core_all_in"] for r in rows if r["lb"] == "nftables"}
    for r in rows:
        if r["lb"] == "nftables" or not r["delivered"]:
            continue
        k = (r["lb"], r["frame_bytes"], r["vips"])
        n = nft.get((r["frame_bytes"], r["vips"]))
        d.setdefault((k, v), []).append((
            r["worker_cpu_s"] / r["delivered"] * 1e6, r["softirq_gen_cpu_s"] / r["delivered"] * 1e6,
            r["pps_per_core_lb"], r["pps_per_core_all_in"], r["pps_per_core_all_in"] / n if n else 0,
            float(r["loadavg"].split()[0])))
print("| LB | frame | VIPs | build | worker µs/frame | generator softirq µs/frame | pps/core LB | pps/core all-in | all-in vs nftables | load |")
print("|---|---|---|---|---|---|---|---|---|---|")
for (k, v), e in sorted(d.items()):
    rg = lambda i, f: "–".join(f % x for x in (min(x[i] for x in e), max(x[i] for x in e)))
    print(f"| {k[0]} | {k[1]} B | {k[2]} | {v} | {rg(0, '%.2f')} | {rg(1, '%.2f')} | {rg(2, '%.0f')} | {rg(3, '%.0f')} | {rg(4, '%.2f')}× | {rg(5, '%.1f')} |")
PY
