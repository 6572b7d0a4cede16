#!/usr/bin/env bash
# Counts the public items of the core crate `keyplane`: every item rustdoc
# documents with `pub` visibility (modules, types, fields, variants, functions,
# methods, constants, re-exports, macros), from rustdoc's JSON output.
# Trait-impl members (which carry no visibility of their own) are not counted.
#   ./scripts/public-items.sh            total
#   ./scripts/public-items.sh --by-file  per source file, then the total
set -euo pipefail
cd "$(dirname "$0")/.."
RUSTC_BOOTSTRAP=1 cargo rustdoc -q -p keyplane --lib -- -Z unstable-options --output-format json 2>/dev/null
python3 - "${1:-}" <<'PY'
import collections, json, sys
d = json.load(open("target/doc/keyplane.json"))
files = collections.Counter()
for item in d["index"].values():
    if item["crate_id"] == 0 and item["visibility"] == "public":
        span = item.get("span") or {}
        files[span.get("filename", "?").split("src/")[-1]] += 1
if sys.argv[1] == "--by-file":
    for f, n in sorted(files.items(), key=lambda x: (-x[1], x[0])):
        print(f"{n:5} {f}")
print(f"keyplane public items: {sum(files.values())}")
PY
