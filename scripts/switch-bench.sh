#!/usr/bin/env bash
# keyplane switch per-core benchmark (issue #16): keyplane switch (AF_PACKET, AF_XDP) against the
# Linux bridge and the kernel's IP forwarding on the same veth topology, generator + forwarder +
# sink pinned to one CPU, plus FIB memory per MAC. Root; a few minutes. See docs/switch.md.
#
#   scripts/switch-bench.sh [SECS] [ROUNDS] [RATE] [CPU]
#
# SECS per measurement (default 2), ROUNDS (3), paced RATE in frames/s for the per-core cost
# (50000), CPU to pin everything to (1). Environment: SWITCH_PERCORE_FIB (L2 FIB structure, default
# othello:filtered=8; e.g. ludo:fingerprint_bits=8), SWITCH_PERCORE_ONLY (run only matching cases),
# SWITCH_PERCORE_JSON (default docs/bench/switch_percore.json), SKIP_MEMORY=1 (no FIB memory run).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" != 0 ]; then
    echo "switch-bench.sh: needs root (network namespaces, AF_XDP)" >&2
    exit 1
fi
cargo build --release -p keyplane-switch --example switch_percore --example fib_memory
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), CPUs: $(nproc), kernel $(uname -r)" >&2
./target/release/examples/switch_percore "${1:-2}" "${2:-3}" "${3:-50000}" "${4:-1}"
if [ "${SKIP_MEMORY:-0}" != 1 ]; then
    ./target/release/examples/fib_memory
fi
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
