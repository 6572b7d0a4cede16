#!/usr/bin/env bash
# A demo topology of network namespaces for trying the keyplane switch / LB by hand.
#
#   scripts/testnet.sh up [HOSTS] [--bridge]   create namespace kpdemo-sw and kpdemo-h1..hHOSTS (default 4),
#                                              host i: eth0 <-> sw: p<i>, 198.18.0.i/24 and fd00::i/64,
#                                              MAC 02:6b:00:00:00:0i; --bridge joins p1..pN in a Linux
#                                              bridge br0 inside kpdemo-sw (the kernel's own L2 forwarding)
#   scripts/testnet.sh down                    delete every kpdemo-* namespace (and with them all interfaces)
#   scripts/testnet.sh status                  list the namespaces and their interfaces
#
# Then e.g.:  ip netns exec kpdemo-sw keyplane switch --port p1 --port p2 ... --fib fib.kpl
#             ip netns exec kpdemo-h1 ping 198.18.0.2
# Addresses come only from 198.18.0.0/15 and fd00::/8; nothing is attached to the host's own namespace.
set -euo pipefail
PREFIX=kpdemo

need_root() {
  if [ "$(id -u)" != 0 ]; then echo "testnet.sh: run as root (network namespaces)" >&2; exit 1; fi
  command -v ip >/dev/null || { echo "testnet.sh: needs iproute2 (apt-get install iproute2)" >&2; exit 1; }
}

down() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-" || true); do
    ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null || true
    ip netns del "$ns"
    echo "deleted $ns"
  done
}

up() {
  local hosts=4 bridge=0
  for a in "$@"; do
    case "$a" in
      --bridge) bridge=1 ;;
      ''|*[!0-9]*) echo "testnet.sh up: unknown argument $a (use a host count and/or --bridge)" >&2; exit 2 ;;
      *) hosts=$a ;;
    esac
  done
  if [ "$hosts" -lt 1 ] || [ "$hosts" -gt 250 ]; then echo "testnet.sh: 1 to 250 hosts" >&2; exit 2; fi
  if ip netns list | grep -q "^$PREFIX-"; then echo "testnet.sh: $PREFIX-* namespaces exist; run '$0 down' first" >&2; exit 1; fi
  trap 'echo "testnet.sh: failed, cleaning up" >&2; down' ERR
  ip netns add "$PREFIX-sw"
  ip -n "$PREFIX-sw" link set lo up
  if [ "$bridge" = 1 ]; then
    ip -n "$PREFIX-sw" link add br0 type bridge stp_state 0 forward_delay 0
    ip -n "$PREFIX-sw" link set br0 up
  fi
  for i in $(seq 1 "$hosts"); do
    local h="$PREFIX-h$i" mac
    mac=$(printf '02:6b:00:00:00:%02x' "$i")
    ip netns add "$h"
    ip -n "$h" link set lo up
    ip -n "$h" link add eth0 address "$mac" type veth peer name "p$i" netns "$PREFIX-sw"
    ip -n "$h" addr add "198.18.0.$i/24" dev eth0
    ip -n "$h" addr add "fd00::$i/64" dev eth0 nodad
    ip -n "$h" link set eth0 up
    ip -n "$PREFIX-sw" link set "p$i" up
    if [ "$bridge" = 1 ]; then ip -n "$PREFIX-sw" link set "p$i" master br0; fi
    echo "$h: eth0 $mac 198.18.0.$i/24 fd00::$i/64  <->  $PREFIX-sw: p$i"
  done
  trap - ERR
}

status() {
  for ns in $(ip netns list | awk '{print $1}' | grep "^$PREFIX-" || true); do
    echo "== $ns"
    ip -n "$ns" -br addr
  done
}

case "${1:-}" in
  up) need_root; shift; up "$@" ;;
  down) need_root; down ;;
  status) status ;;
  *) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
