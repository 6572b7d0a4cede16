#!/usr/bin/env bash
# Builds the C library and the `keyplane` command, makes a blob and a delta
# stream with the CLI, then compiles and runs the C test program and the
# packet-loop example against the static library. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
PROFILE_DIR=${KEYPLANE_PROFILE_DIR:-debug}
if [ "$PROFILE_DIR" = release ]; then
  cargo build --release -p keyplane-capi -p keyplane-cli
else
  # The test profile (what `cargo test` just built) shares target/debug.
  cargo build --profile test -p keyplane-capi -p keyplane-cli
fi
CC=${CC:-cc}
if ! command -v "$CC" >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    (apt-get update -qq && apt-get install -y -qq gcc libc6-dev) >/dev/null
  fi
  CC=cc
fi
T=target/capi-test
rm -rf "$T" && mkdir -p "$T"
KP=target/$PROFILE_DIR/keyplane
LIB=target/$PROFILE_DIR/libkeyplane_c.a
for i in $(seq 0 999); do printf 'key%d\t%d\n' "$i" $(( (i * 7) % 256 )); done > "$T/keys.tsv"
"$KP" build -i "$T/keys.tsv" -l 8 -O filtered=8 --out "$T/t.kpl" --control "$T/t.kpc" 2>/dev/null
{ for i in $(seq 1000 1099); do printf 'set\tkey%d\t%d\n' "$i" $(( i % 256 )); done
  for i in $(seq 0 9); do printf 'del\tkey%d\n' "$i"; done; } > "$T/ops.tsv"
"$KP" update --control "$T/t.kpc" --ops "$T/ops.tsv" --deltas "$T/d.kpd" 2>/dev/null
# Another table with the same structure, options and keys: it must refuse d.kpd.
"$KP" build -i "$T/keys.tsv" -l 8 -O filtered=8 --out "$T/other.kpl" 2>/dev/null
$CC -std=c11 -O2 -Wall -Wextra -Werror -Icrates/keyplane-capi/include crates/keyplane-capi/tests/capi_test.c "$LIB" -lpthread -ldl -lm -o "$T/capi_test"
# Tables of 8-byte keys for the typed paths (kp_table_get_u64, kp_table_get_batch_u64),
# one of every registered structure.
U64_STRUCTURES="othello setsep ludo cuckoo cuckoo-partial cfw bfw fht fpt"
for st in $U64_STRUCTURES; do
  "$KP" build -s "$st" --generate 3000 --gen-key-type u64 -l 8 --dump-keys "$T/u64_$st.tsv" --out "$T/u64_$st.kpl" 2>/dev/null
done
U64_ARGS=()
for st in $U64_STRUCTURES; do U64_ARGS+=("$T/u64_$st.kpl" "$T/u64_$st.tsv"); done
"$T/capi_test" "$T/t.kpl" "$T/d.kpd" "$T/other.kpl" "${U64_ARGS[@]}"
# The packet-loop example, against a table of 5-tuple keys.
$CC -std=c11 -O2 -Wall -Wextra -Werror -Icrates/keyplane-capi/include examples/c/packet_loop.c "$LIB" -lpthread -ldl -lm -o "$T/packet_loop"
"$KP" build --generate 100000 --gen-key-type fivetuple -l 8 -O filtered=8 --dump-keys "$T/flows.tsv" --out "$T/flows.kpl" 2>/dev/null
"$T/packet_loop" "$T/flows.kpl" "$T/flows.tsv"
