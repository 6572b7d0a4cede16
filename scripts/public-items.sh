#!/usr/bin/env bash
# Counts the public items of the core crate `keyplane`: every item rustdoc
# documents with `pub` visibility (modules, types, fields, variants, functions,
# methods, constants, re-exports, macros), from rustdoc's JSON output.
# Trait-impl members (which carry no visibility of their own) are not counted.
#
# Two figures: the API (the issue's target: everything except the plumbing
# behind `keyplane::ext` — the blob/delta frame, the packed array and memory
# hints, documented there as unstable extension points; the `Wire` trait,
# defined in ext/wire.rs but re-exported at the root as part of the table
# contract, is counted) and the total including `keyplane::ext`.
#   ./scripts/public-items.sh            the two totals
#   ./scripts/public-items.sh --by-file  per source file, then the totals
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTC_BOOTSTRAP=1 cargo rustdoc -q -p keyplane --lib -- -Z unstable-options --output-format json 2>/dev/null
python3 - "${1:-}" <<'PY'
import collections, json, sys
d = json.load(open("target/doc/keyplane.json"))
EXT = {"ext.rs", "wire.rs", "bits.rs", "mem.rs"}
files = collections.Counter()
ext = 0
for item in d["index"].values():
    if item["crate_id"] == 0 and item["visibility"] == "public":
        span = item.get("span") or {}
        f = span.get("filename", "?").split("src/")[-1]
        files[f] += 1
        if f in EXT and not ("trait" in item["inner"] and item.get("name") == "Wire"):
            ext += 1
if sys.argv[1] == "--by-file":
    for f, n in sorted(files.items(), key=lambda x: (-x[1], x[0])):
        print(f"{n:5} {f}{'  (keyplane::ext)' if f in EXT else ''}")
total = sum(files.values())
print(f"keyplane public API items (without keyplane::ext): {total - ext}")
print(f"keyplane public items (with keyplane::ext): {total}")
PY
