#!/bin/sh
# Builds the reference harnesses of issue #20 outside the repository:
#   crates/keyplane-bench/refs/build.sh [DIR]   (default /tmp/keyplane-refs)
# Clones sdyy1990/Othello (or $OTHELLO_GIT, e.g. a local mirror) at the commit the figures in docs/single-get.md
# were measured on, applies the two missing `return` statements the issue
# names (getrand, DisjointSet::resize), and compiles othello_sdyy.cc against
# it. Nothing it fetches or builds is committed. Run the harness under
# `ulimit -s unlimited` (sdyy's union-find recurses).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-/tmp/keyplane-refs}
mkdir -p "$dir"
cd "$dir"
if [ ! -d Othello ]; then
    git clone -q "${OTHELLO_GIT:-https://github.com/sdyy1990/Othello}" Othello
fi
git -C Othello checkout -q 5496cf7
# The two fixes (idempotent): without them the build reads garbage / crashes.
grep -q "rand());\s*return v;" Othello/src/othello.h || grep -A1 "v = (va ^ rand());" Othello/src/othello.h | grep -q "return v;" ||
    sed -i 's/^\(\s*\)v = (va ^ rand());$/\1v = (va ^ rand());\n\1return v;/' Othello/src/othello.h
grep -q "return true;" Othello/src/disjointset.h ||
    sed -i '0,/fa->push_back(-1);/s//fa->push_back(-1);\n        return true;/' Othello/src/disjointset.h
CXX=${CXX:-$(command -v clang++ || command -v g++)}
$CXX -O3 -march=${MARCH:-native} -std=c++17 -w -IOthello/src "$here/othello_sdyy.cc" -o othello_sdyy
echo "$dir/othello_sdyy"
