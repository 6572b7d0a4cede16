#!/bin/sh
# Instructions per lookup under callgrind (deterministic, unaffected by load):
# total of one pass of each PATH minus the `none` pass (which builds the same
# table and walks the same stream), over 1,048,576 lookups on 64K keys (or N).
# usage: [N=1M] scripts/single_get_cg.sh BIN STRUCTURE PATH...
#   BIN: target/release/examples/single_get; STRUCTURE: othello, othello_pow2, setsep;
#   PATH: get_self get_reader get_u64_self get_u64_reader batched
#   N: keys (default 64K)
# Reference (sdyy1990/Othello, docs/benchmarks.md "Reference harnesses"): 2 passes minus 1 pass,
#   yes go | head -N | valgrind --tool=callgrind HARNESS_DIR/cg_othello_sdyy 65536 1048576 1   (N = 1, 2)
set -e
bin=$1; s=$2; shift 2
n=${N:-64K}; q=1048576
tmp=${TMPDIR:-/tmp}/single_get_cg.$$
base=$(valgrind --tool=callgrind --callgrind-out-file=$tmp.none "$bin" --n $n --queries $q --structures "$s" --only none 2>&1 | sed -n 's/.*Collected : //p')
for p in "$@"; do
  t=$(valgrind --tool=callgrind --callgrind-out-file=$tmp.$p "$bin" --n $n --queries $q --structures "$s" --only "$p" 2>&1 | sed -n 's/.*Collected : //p')
  echo "$s $p $(python3 -c "print(round(($t-$base)/$q,1))")"
done
rm -f $tmp.*
