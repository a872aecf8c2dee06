#!/usr/bin/env bash
# Runs this host's part of a multi-host dtrain run: the same command on every host.
#
#   scripts/run-host.sh JOB [dtrain train options...]
#   scripts/run-host.sh --resume RUN_DIR [dtrain resume options...]
#
# e.g. on each host of configs/fashion_cnn_2hosts.toml, from the repository root:
#   scripts/run-host.sh configs/fashion_cnn_2hosts.toml            # node found by address
#   scripts/run-host.sh configs/fashion_cnn_2hosts.toml --node 1   # or told
#   scripts/run-host.sh --resume runs/fashion_cnn_2hosts
#
# Node 0 (the coordinator's host) serves the rendezvous and writes the run directory;
# every host starts one worker per slot of its [cluster] entry. Relative paths in the
# job (run_dir, token_file) are taken from the working directory, so run it from the
# same directory on every host. Ctrl-C or SIGTERM stops the whole run after a checkpoint.
#
# The binary is $DTRAIN if set, else build/dtrain of this repository (scripts/build.sh).
# Before starting it raises the open-file limit: each worker keeps sockets to every peer.
set -euo pipefail

me=$(basename "$0")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
dtrain=${DTRAIN:-$repo/build/dtrain}

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

(($#)) || {
  usage >&2
  exit 2
}
case $1 in
  -h | --help)
    usage
    exit 0
    ;;
esac

if [[ ! -x $dtrain ]]; then
  echo "$me: no dtrain binary at $dtrain; build it with scripts/build.sh or set DTRAIN=/path/to/dtrain" >&2
  exit 2
fi

# Gloo opens a connection per peer per collective context, ZeroMQ a few more: a
# default soft limit of 1024 is short for large runs. Up to the hard limit, never down.
raise_open_files() {
  local soft hard want=65536
  soft=$(ulimit -Sn)
  hard=$(ulimit -Hn)
  [[ $soft == unlimited ]] && return 0
  [[ $hard != unlimited ]] && ((hard < want)) && want=$hard
  ((soft < want)) && ulimit -Sn "$want" 2>/dev/null
  return 0
}
raise_open_files

if [[ $1 == --resume ]]; then
  if (($# < 2)); then
    echo "$me: --resume needs the run directory: $me --resume RUN_DIR [options]" >&2
    exit 2
  fi
  run_dir=$2
  shift 2
  exec "$dtrain" resume "$run_dir" "$@"
fi
job=$1
shift
exec "$dtrain" train "$job" "$@"
