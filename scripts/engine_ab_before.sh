#!/bin/sh
# Builds issue #15's "before" binary for scripts/engine_ab.py: commit 6c70506
# (the last commit before the engine) with today's
# crates/keyplane/examples/engine_ab.rs and a shim for the typed path the old
# build lacks (`get_u64(k)` = `get(&k.to_le_bytes())`, on tables and readers).
#   scripts/engine_ab_before.sh [WORKTREE] [TARGET_DIR]
# prints the binary's path. Defaults: /tmp/kp-before, /tmp/kp-before-target.
set -eu
cd "$(dirname "$0")/.."
wt=${1:-/tmp/kp-before}
tgt=${2:-/tmp/kp-before-target}
[ -d "$wt" ] || git worktree add -f "$wt" 6c70506 >/dev/null
python3 - "$wt/crates/keyplane/examples/engine_ab.rs" crates/keyplane/examples/engine_ab.rs <<'PY'
import sys
dst, src = sys.argv[1], sys.argv[2]
s = open(src).read()
shim = '''
/// The pre-engine build has no typed path: `get_u64` = `get` on the key's 8 bytes.
trait GetU64 {
    fn get_u64(&self, k: u64) -> Option<u64>;
}
impl<T: LookupTable> GetU64 for T {
    fn get_u64(&self, k: u64) -> Option<u64> {
        self.get(&k.to_le_bytes())
    }
}
trait RGetU64 {
    fn get_u64(&self, k: u64) -> Option<u64>;
}
impl<R: ReadHandle> RGetU64 for R {
    fn get_u64(&self, k: u64) -> Option<u64> {
        self.get(&k.to_le_bytes())
    }
}
'''
s = s.replace("use std::hint::black_box;\n", "use std::hint::black_box;\n" + shim, 1)
open(dst, "w").write(s)
PY
(cd "$wt" && CARGO_TARGET_DIR="$tgt" cargo build -q --release -p keyplane --example engine_ab)
echo "$tgt/release/examples/engine_ab"
