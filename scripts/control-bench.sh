#!/usr/bin/env bash
# keyplane serve targets (issue #17) on 1M-key Othello and Ludo tables, 3
# alternating rounds, into docs/bench/control.json:
#   - durable updates/s in batches of 1000 (target >= 200K/s), one client
#     waiting for each ack and 4 concurrent clients (pipelined group commit);
#   - p50/p99 write-ack -> applied at a subscriber at 10K updates/s offered
#     (target p99 <= 10 ms);
#   - subscriber catch-up from the 1M-key blob (target <= 1 s).
# About 3 minutes on a quiet 2-core machine (release build not included).
# Usage: scripts/control-bench.sh [OUT.json] [RUNS]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/bench/control.json}
runs=${2:-3}
cargo build --release -p keyplane-control --example control_bench
KEYPLANE_BENCH_BATCHES=1000 KEYPLANE_BENCH_WRITERS=1,4 \
  ./target/release/examples/control_bench 1000000 3 "$out" othello,ludo "$runs"
