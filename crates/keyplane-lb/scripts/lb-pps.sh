#!/bin/sh
# Packets per forwarding-core-second of `keyplane lb` (Concury and Maglev
# mode, AF_XDP and AF_PACKET) against the nftables load balancer on the same
# namespace topology and generator: 64 and 1500 B, one VIP and 64 mixed
# VIPs, 1M tracked flows. Root; about 6 minutes; leaves no namespace behind.
# The generator is pinned to CPU $GEN_CPU (0), the LB worker to $LB_CPU (1).
# Env: FLOWS (1000000), NET_SECONDS (3), REPS_NET (2), LBS (all five).
# Writes $OUT (/tmp/lb-pps.json), prints the table, and with MERGE=1 puts
# the rows into docs/bench/lb-service.json.
set -eu
cd "$(dirname "$0")/../../.."
OUT=${OUT:-/tmp/lb-pps.json}
cargo build --release -p keyplane-lb --example lb_service_bench
NET=1 ONLY_NET=1 OUT="$OUT" ./target/release/examples/lb_service_bench >/dev/null
if [ "${MERGE:-0}" = 1 ]; then
    python3 crates/keyplane-lb/scripts/lb_pps_table.py "$OUT" --merge docs/bench/lb-service.json
else
    python3 crates/keyplane-lb/scripts/lb_pps_table.py "$OUT"
fi
