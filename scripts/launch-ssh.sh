#!/usr/bin/env bash
# Starts a multi-host run from one machine: scripts/run-host.sh on every host over
# ssh, host i with --node i, their output here prefixed with the host's name.
#
#   scripts/launch-ssh.sh [options] JOB HOST0 HOST1 ... [-- dtrain train options...]
#   scripts/launch-ssh.sh [options] --resume RUN_DIR HOST0 HOST1 ... [-- dtrain resume options...]
#
#   e.g. scripts/launch-ssh.sh configs/fashion_cnn_2hosts.toml 10.77.0.1 10.77.0.2 -- --set train.epochs=3
#
# HOSTs are ssh destinations ([user@]host), in the order of the job's [cluster] hosts:
# the first is node 0, the coordinator's host. Every host needs the repository (with
# build/dtrain built) at the same path as here, or at --remote-dir, and the job's
# relative paths (token_file, run_dir) are taken from there.
#
# If a host's command fails, or this script gets Ctrl-C or SIGTERM, every other host's
# dtrain is sent SIGTERM over ssh: its workers save a checkpoint and stop. Those still
# running after --grace seconds are hung up on (ssh -tt: the remote side gets SIGHUP);
# a second Ctrl-C hangs up at once. The exit status is the first failing host's (or
# 128 + signal when stopped by one), 0 when every host succeeded.
#
# Options:
#   --remote-dir DIR   the repository's path on the hosts (default: this repository's path here)
#   --dtrain PATH      the dtrain binary on the hosts (default: build/dtrain in the remote dir)
#   --ssh "CMD ..."    the ssh command and its options (default: ssh), e.g. --ssh "ssh -p 2222"
#   --grace SECONDS    time to stop cleanly before hanging up (default 60)
set -euo pipefail

me=$(basename "$0")
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
remote_dir=$repo
dtrain="" # run-host.sh's default
ssh_cmd=(ssh)
grace=60

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'
}

fail() {
  echo "$me: $*" >&2
  exit 2
}

while (($#)); do
  case $1 in
    --remote-dir)
      (($# >= 2)) || fail "--remote-dir needs a directory"
      remote_dir=$2
      shift 2
      ;;
    --dtrain)
      (($# >= 2)) || fail "--dtrain needs the binary's path on the hosts"
      dtrain=$2
      shift 2
      ;;
    --ssh)
      (($# >= 2)) || fail "--ssh needs a command, e.g. --ssh \"ssh -p 2222\""
      read -r -a ssh_cmd <<<"$2"
      ((${#ssh_cmd[@]})) || fail "--ssh needs a command, e.g. --ssh \"ssh -p 2222\""
      shift 2
      ;;
    --grace)
      if (($# < 2)) || ! [[ $2 =~ ^[0-9]+$ ]]; then fail "--grace needs a number of seconds"; fi
      grace=$2
      shift 2
      ;;
    -h | --help)
      usage
      exit 0
      ;;
    *) break ;;
  esac
done

# What run-host.sh gets first: the job, or --resume RUN_DIR.
if [[ ${1:-} == --resume ]]; then
  (($# >= 2)) || fail "--resume needs the run directory: $me --resume RUN_DIR HOST0 HOST1 ..."
  what=(--resume "$2")
  shift 2
else
  (($# >= 1)) || {
    usage >&2
    exit 2
  }
  what=("$1")
  shift
fi
hosts=()
while (($#)) && [[ $1 != -- ]]; do
  hosts+=("$1")
  shift
done
(($#)) && shift # the --
options=("$@")
((${#hosts[@]})) || fail "no hosts given: $me JOB HOST0 HOST1 ... (node 0 first)"

declare -A running=() # background pipeline's pid -> node, while it runs
state=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-launch.XXXXXX")
timer=""   # the grace period's sleep, once stopping
stoppers=() # the background stop requests
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
  hang_up # nothing is left running on an unexpected exit of this script
  if [[ -n $timer ]]; then kill "$timer" 2>/dev/null || true; fi
  if ((${#stoppers[@]})); then kill "${stoppers[@]}" 2>/dev/null || true; fi
  rm -rf "$state"
}
trap cleanup EXIT

# Prints a host's output with its name in front; the remote shell's first line
# is its pid (the dtrain it execs keeps it), kept for a stop over ssh.
prefix_output() {
  local host=$1 pid_file=$2 line
  while IFS= read -r line || [[ -n $line ]]; do
    line=${line%$'\r'} # ssh -tt ends lines with \r\n
    if [[ $line == "@dtrain-launch-pid "* ]]; then
      echo "${line#* }" >"$pid_file"
      continue
    fi
    printf '[%s] %s\n' "$host" "$line"
  done
}

for i in "${!hosts[@]}"; do
  printf -v remote 'cd %q && echo "@dtrain-launch-pid $$" && exec' "$remote_dir"
  [[ -n $dtrain ]] && printf -v remote '%s env DTRAIN=%q' "$remote" "$dtrain"
  remote+=" scripts/run-host.sh"
  printf -v args ' %q' "${what[@]}" --node "$i" "${options[@]}"
  # Background commands of a script ignore SIGINT, so Ctrl-C reaches only this
  # shell, which then stops the hosts in order. The helper records ssh's pid.
  {
    bash -c 'echo $$ >"$0" && exec "$@"' "$state/ssh.$i" "${ssh_cmd[@]}" -tt -n "${hosts[$i]}" "$remote$args" 2>&1
  } | prefix_output "${hosts[$i]}" "$state/pid.$i" &
  running[$!]=$i
done

stopping=0
status=0

# SIGTERM to every host's dtrain still running: a clean stop after a checkpoint.
stop_hosts() {
  ((stopping)) && return 0
  stopping=1
  local i
  for i in "${running[@]}"; do
    # A host still connecting has not sent its pid yet: wait for it.
    (
      for ((tenths = 0; tenths < grace * 10; tenths++)); do
        [[ -s $state/pid.$i ]] && break
        sleep 0.1
      done
      [[ -s $state/pid.$i ]] && "${ssh_cmd[@]}" -n "${hosts[$i]}" "kill -TERM $(cat "$state/pid.$i")"
    ) >/dev/null 2>&1 &
    stoppers+=("$!")
  done
  sleep "$grace" &
  timer=$!
}

# Ends the ssh sessions still open; with -tt the remote processes get SIGHUP.
hang_up() {
  local i pid
  for i in "${running[@]}"; do
    pid=$(cat "$state/ssh.$i" 2>/dev/null || true)
    [[ -n $pid ]] && kill -TERM "$pid" 2>/dev/null
  done
  return 0
}

# shellcheck disable=SC2317 # run by the signal traps
on_signal() {
  local name=$1 code=$2
  if ((stopping)); then
    echo "$me: $name again: hanging up on the hosts" >&2
    hang_up
    return
  fi
  ((status)) || status=$code
  echo "$me: $name: stopping every host (each saves a checkpoint; $name again to hang up at once)" >&2
  stop_hosts
}
trap 'on_signal SIGINT 130' INT
trap 'on_signal SIGTERM 143' TERM
trap 'on_signal SIGHUP 129' HUP

while ((${#running[@]})); do
  finished=""
  rc=0
  wait -n -p finished "${!running[@]}" ${timer:+"$timer"} || rc=$?
  [[ -n ${finished:-} ]] || continue # a signal's trap ran
  if [[ $finished == "$timer" ]]; then
    timer=""
    echo "$me: hosts still running ${grace}s after the stop: hanging up" >&2
    hang_up
    continue
  fi
  i=${running[$finished]}
  unset "running[$finished]"
  if ((rc != 0)) && ((status == 0)); then
    status=$rc
    if ((!stopping)) && ((${#running[@]})); then
      echo "$me: ${hosts[$i]} (node $i) failed with exit status $rc; stopping the other hosts" >&2
      stop_hosts
    fi
  fi
done
exit "$status"
