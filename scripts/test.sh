#!/usr/bin/env bash
# The keyplane test suite: everything a change must pass. Installs what it needs.
#   0. Packages: protoc (keyplane-control), a venv with grpcio + grpcio-tools
#   1. Rust: unit, integration (incl. the CLI and control-plane end-to-end tests) and doc tests
#   2. C: the C library's test program and the packet-loop example (cc)
#   3. Python: the keyplane package built with maturin into target/pyenv, pytest
#   4. Fuzz targets compile, clippy clean (own workspace; run one: cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run <target>)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v cargo >/dev/null 2>&1; then
  echo "cargo not found: install Rust from https://rustup.rs first" >&2
  exit 1
fi
apt_install() {  # apt_install PACKAGE...: only when apt-get exists and we may use it
  if command -v apt-get >/dev/null 2>&1; then
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo="sudo"
    $sudo apt-get update -qq >/dev/null && $sudo apt-get install -y -qq "$@" >/dev/null
  fi
}

# Network tests (keyplane-net and the functions on it) build namespaces with `ip` and ping through them.
if ! command -v ip >/dev/null 2>&1 || ! command -v ping >/dev/null 2>&1; then apt_install iproute2 iputils-ping; fi
# keyplane-lb's network tests: nginx backends, the XDP decap program (clang + libbpf headers),
# the nftables load balancer, offload settings and curl.
if ! command -v nginx >/dev/null 2>&1 || ! command -v clang >/dev/null 2>&1 || ! command -v nft >/dev/null 2>&1 \
  || ! [ -e /usr/include/bpf/bpf_helpers.h ] || ! command -v ethtool >/dev/null 2>&1 || ! command -v curl >/dev/null 2>&1; then
  apt_install nginx-light clang llvm libbpf-dev nftables ethtool curl
fi
echo "== packages for the control-plane tests"
# keyplane-control: protoc builds the gRPC code; the Python client test
# generates its stubs with grpcio-tools.
if ! command -v protoc >/dev/null 2>&1; then
  apt_install protobuf-compiler
fi
# keyplane-control's etcd test starts a three-member etcd cluster.
if ! command -v etcd >/dev/null 2>&1; then
  apt_install etcd-server
fi
PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1 || ! "$PY" -c 'import venv, ensurepip' >/dev/null 2>&1; then
  apt_install python3 python3-venv python3-dev
fi
VENV=target/pyenv
if [ ! -x "$VENV/bin/python" ]; then
  "$PY" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install -q --disable-pip-version-check grpcio grpcio-tools
export KEYPLANE_PYTHON="$PWD/$VENV/bin/python" KEYPLANE_REQUIRE_PYTHON_GRPC=1

cargo test --workspace --all-targets --no-fail-fast
cargo test --workspace --doc

echo "== C library"
if ! command -v cc >/dev/null 2>&1; then apt_install gcc libc6-dev; fi
KEYPLANE_PROFILE_DIR=debug ./crates/keyplane-capi/tests/run.sh

echo "== Python package"
"$VENV/bin/python" -m pip install -q --disable-pip-version-check maturin numpy pytest
(
  cd crates/keyplane-py
  export VIRTUAL_ENV="$PWD/../../$VENV" CARGO_TARGET_DIR="$PWD/../../target/py"
  export PATH="$VIRTUAL_ENV/bin:$PATH"
  maturin develop -q
  pytest -q tests
)

echo "== fuzz targets compile"
# libfuzzer-sys builds libFuzzer's C++ sources in its build script.
if ! command -v c++ >/dev/null 2>&1; then apt_install g++; fi
# fuzz/ has its own workspace and repeats the workspace [lints]; clippy enforces them.
if cargo clippy --version >/dev/null 2>&1; then
  CARGO_TARGET_DIR=target/fuzz-check cargo clippy -q --manifest-path fuzz/Cargo.toml --bins -- -D warnings
else
  CARGO_TARGET_DIR=target/fuzz-check cargo check -q --manifest-path fuzz/Cargo.toml --bins
fi
