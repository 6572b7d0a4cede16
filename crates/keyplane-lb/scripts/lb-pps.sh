#!/bin/sh
# Packets per forwarding-core-second of `keyplane lb` (Concury with the
# in-kernel XDP fast path, `--io xdp`; Concury and Maglev mode on AF_XDP)
# against the nftables load balancer (kube-proxy style DNAT + conntrack +
# masquerade) on the same namespace topology and generator: 64 and 1500 B,
# one VIP and 64 mixed VIPs, FLOWS tracked flows. Rounds alternate the LBs
# (Concury xdp, Concury af_xdp, Maglev, nftables, Concury xdp, ...). Root;
# about 6-7 minutes with the defaults on a quiet 2-core machine; leaves no
# namespace behind. CPU: nftables and Concury xdp both forward in softirq:
# both are charged the softirq time of both CPUs (/proc/stat), Concury xdp
# also its user-space threads (slow path, reports, control, health).
# The generator is pinned to CPU $GEN_CPU (0), the LB worker to $LB_CPU (1).
# GEN (xdp): the measured traffic's generator, the same for every LB of a run:
#   xdp: XDP live frames (BPF_PROG_TEST_RUN, bpf/gen_xdp.c) on the client's
#     eth0, page-pool frames as a NIC driver's XDP_TX would send them;
#   af_packet_pp: AF_PACKET (TPACKET ring), with a generic XDP pass program
#     (frags support) on the client's bridge port that moves every frame into
#     page-pool memory with full headroom there, so no veth copies it again
#     on the LB's side (the copy runs in the generator CPU's softirq and is
#     charged to every LB alike);
#   af_packet: AF_PACKET as it leaves the socket (the LB's veth copies every
#     frame before an XDP program there sees it; nftables does not).
#   xdp falls back to af_packet_pp, that to af_packet, saying why. The test
#   run's own time (the program, the page pool, ndo_xdp_xmit) is system time
#   of the generator thread and charged to no LB, as AF_PACKET's sendmsg is;
#   what the frames cause after that runs in softirq and is charged as before.
# Env: FLOWS (200000; nftables' masquerade to one address holds at most
# 4 x 64,512 = 258,048 flows with the 4 backends), NET_SECONDS (3),
# REPS_NET (3), LBS (concury-xdp,concury-af_xdp,maglev-af_xdp,nftables;
# also concury-af_packet, maglev-af_packet).
# Writes $OUT (/tmp/lb-pps.json: one JSON row per measurement), prints the
# markdown table for docs/lb-service.md, and with MERGE=1 puts the rows into
# docs/bench/lb-service.json.
set -eu
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/lb-pps.json}
cargo build --release -p keyplane-lb --example lb_service_bench
NET=1 ONLY_NET=1 OUT="$OUT" "${CARGO_TARGET_DIR:-target}/release/examples/lb_service_bench" >/dev/null
if [ "${MERGE:-0}" = 1 ]; then
    python3 crates/keyplane-lb/scripts/lb_pps_table.py "$OUT" --merge docs/bench/lb-service.json
else
    python3 crates/keyplane-lb/scripts/lb_pps_table.py "$OUT"
fi
