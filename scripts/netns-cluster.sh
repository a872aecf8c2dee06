#!/usr/bin/env bash
# A local test cluster for multi-host runs: N network namespaces on this machine,
# each a "host" with its own address, joined by a bridge, so that one machine can
# run configs/fashion_cnn_2hosts.toml as two hosts that reach each other over a
# real (virtual) network and can be killed or cut off one at a time.
#
#   scripts/netns-cluster.sh up N            namespaces dtrain-h0 .. dtrain-h(N-1),
#                                            host i at 10.77.0.(i+1)/24, loopback up
#   scripts/netns-cluster.sh exec I CMD...   runs CMD in host I (its host name is the
#                                            namespace's name, so messages tell hosts apart)
#   scripts/netns-cluster.sh pids I          the pids of every process in host I
#   scripts/netns-cluster.sh down            kills what runs in them and removes them all
#                                            (also leftovers of an earlier, failed up)
# Options, before the command:
#   --prefix NAME    namespaces NAME-h0.. and NAME-net (default dtrain); tests pick
#                    their own so a leftover cluster never breaks them
#   --subnet A.B.C   host i gets A.B.C.(i+1)/24 (default 10.77.0)
#
# The bridge lives in a namespace of its own (NAME-net), so the machine's own
# network, routes and firewall are never touched. Needs root and iproute2 (`ip`);
# where namespaces cannot be made it says why and exits 77 ("cannot run here").
#
# Example, the 2-host job on one machine (token file and dtrain built first):
#   sudo scripts/netns-cluster.sh up 2
#   sudo scripts/netns-cluster.sh exec 0 scripts/run-host.sh configs/fashion_cnn_2hosts.toml &
#   sudo scripts/netns-cluster.sh exec 1 scripts/run-host.sh configs/fashion_cnn_2hosts.toml
#   sudo ip -n dtrain-h1 link set eth0 down      # cut host 1 off (a lost host, not a dead one)
#   sudo scripts/netns-cluster.sh down
set -Eeuo pipefail

readonly kCannotRunHere=77
me=$(basename "$0")
prefix=dtrain
subnet=10.77.0

usage() {
  sed -n '2,/^set -Eeuo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

fail() {
  echo "$me: $*" >&2
  exit 1
}

cannot_run_here() {
  echo "$me: $*" >&2
  exit "$kCannotRunHere"
}

while (($#)); do
  case $1 in
    --prefix)
      (($# >= 2)) || fail "--prefix needs a name"
      prefix=$2
      shift 2
      ;;
    --subnet)
      (($# >= 2)) || fail "--subnet needs the first three numbers of an IPv4 address, like 10.77.0"
      subnet=$2
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) break ;;
  esac
done
(($#)) || {
  usage >&2
  exit 2
}
command=$1
shift

[[ $prefix =~ ^[A-Za-z0-9_.-]{1,40}$ ]] || fail "--prefix '$prefix' must be 1-40 letters, digits, '.', '_' or '-'"
valid_subnet() {
  local a b c
  IFS=. read -r a b c <<<"$subnet"
  [[ $subnet =~ ^[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}$ ]] && ((10#$a <= 255 && 10#$b <= 255 && 10#$c <= 255))
}
valid_subnet || fail "--subnet '$subnet' must be three numbers 0-255 like 10.77.0"

bridge_ns="$prefix-net"
host_ns() { echo "$prefix-h$1"; }

# This cluster's namespaces that exist now (hosts and the bridge's).
existing() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${prefix//./\\.}-(h[0-9]+|net)\$" || true
}

need_root_and_ip() {
  command -v ip >/dev/null 2>&1 || cannot_run_here "needs iproute2's 'ip' (apt-get install iproute2)"
  command -v unshare >/dev/null 2>&1 || cannot_run_here "needs util-linux's 'unshare' (apt-get install util-linux)"
  [[ $(id -u) -eq 0 ]] || cannot_run_here "needs root to create network namespaces; run it with sudo"
}

host_index() {
  [[ ${1:-} =~ ^[0-9]+$ ]] || fail "host index must be a number (got '${1:-}')"
  ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$(host_ns "$1")" ||
    fail "no namespace $(host_ns "$1"); bring the cluster up first: $me --prefix $prefix up N"
}

cluster_down() {
  local ns pid
  for ns in $(existing); do
    # A namespace whose processes live on outlives its name: end them first.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
  [[ -z $(existing) ]] || fail "could not remove: $(existing | tr '\n' ' ')"
}

cluster_up() {
  local n=$1 i ns
  if ! [[ $n =~ ^[0-9]+$ ]] || ((n < 1 || n > 250)); then fail "up needs a host count from 1 to 250 (got '$n')"; fi
  [[ -z $(existing) ]] || fail "cluster '$prefix' is already up ($(existing | tr '\n' ' ')); run: $me --prefix $prefix down"
  ip netns add "$bridge_ns" 2>/dev/null ||
    cannot_run_here "cannot create network namespaces here (ip netns add failed: no CAP_SYS_ADMIN, or /run/netns not writable)"
  if ! ip -n "$bridge_ns" link set lo up 2>/dev/null; then
    cluster_down
    cannot_run_here "cannot configure network namespaces here (ip link failed: no CAP_NET_ADMIN?)"
  fi
  # From here on a failure leaves nothing behind.
  trap 'cluster_down >/dev/null 2>&1 || true; echo "$me: up $n failed (see above); removed what it had made" >&2' ERR
  ip -n "$bridge_ns" link add br0 type bridge
  ip -n "$bridge_ns" link set br0 up
  for ((i = 0; i < n; i++)); do
    ns=$(host_ns "$i")
    ip netns add "$ns"
    ip -n "$bridge_ns" link add "h$i" type veth peer name eth0 netns "$ns"
    ip -n "$bridge_ns" link set "h$i" master br0 up
    ip -n "$ns" link set lo up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
  done
  trap - ERR
  for ((i = 0; i < n; i++)); do echo "$(host_ns "$i") $subnet.$((i + 1))"; done
}

case $command in
  up)
    (($# == 1)) || fail "usage: $me up N"
    need_root_and_ip
    cluster_up "$1"
    ;;
  down)
    (($# == 0)) || fail "usage: $me down"
    need_root_and_ip
    cluster_down
    ;;
  exec)
    (($# >= 2)) || fail "usage: $me exec I CMD [ARGS...]"
    need_root_and_ip
    host_index "$1"
    ns=$(host_ns "$1")
    shift
    # A UTS namespace of its own gives the host its name; every step execs, so
    # the caller's child is CMD itself (its pid, its exit status).
    # shellcheck disable=SC2016 # $0 and $@ belong to the inner sh
    exec ip netns exec "$ns" unshare --uts -- sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "$ns" "$@"
    ;;
  pids)
    (($# == 1)) || fail "usage: $me pids I"
    need_root_and_ip
    host_index "$1"
    ip netns pids "$(host_ns "$1")"
    ;;
  *) fail "unknown command '$command'; use up N, down, exec I CMD..., or pids I (--help for more)" ;;
esac
