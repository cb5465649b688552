#!/usr/bin/env bash
# Hosts on one machine: Linux network namespaces joined by veth pairs and a bridge, each link
# shaped with tc, and mpirun across them (docs/testing.md, "Hosts"). The one home of this for the
# tests (tests/common/hosts.h wraps it) and for bench/hosts_scaling.sh. Needs root.
#
#   hosts.sh check                          exit 0 if namespaces can be made here, else 77 and why
#   hosts.sh up CLUSTER N [RATE]            hosts h1..hN at 10.200.0.1..N, links at RATE (tc syntax,
#                                           e.g. 1gbit; none: unshaped veth)
#   hosts.sh rate CLUSTER K RATE            reshapes host K's link, both directions
#   hosts.sh link CLUSTER K up|down         host K's eth0 up or down (a cable pulled)
#   hosts.sh freeze|thaw CLUSTER K          SIGSTOP / SIGCONT every process of host K (a hung host)
#   hosts.sh kill CLUSTER K                 SIGKILL every process of host K
#   hosts.sh pids CLUSTER K                 the processes running on host K
#   hosts.sh exec CLUSTER K CMD...          runs CMD on host K (its namespace, hostname and core)
#   hosts.sh mpirun CLUSTER SLOTS ARGS...   mpirun on h1 with SLOTS ranks on every host, then ARGS
#   hosts.sh down CLUSTER                   kills every process of the cluster, removes it all
#   hosts.sh agent HOST CMD...              mpirun's launch agent (ssh's stand-in), not for users
#
# CLUSTER is a short name (lower-case letters and digits, at most 16): namespaces CLUSTER-sw
# (the switch: the bridge and the hosts' far ends) and CLUSTER-h1..hN (eth0 and lo each), so
# nothing is added to the machine's own network namespace and every address lives inside the
# cluster. Each host has a hostname of its own (hK, a UTS namespace per process tree started
# on it) and its processes are pinned to core (K-1) mod the cores this script may use
# (HOSTS_CORES="0 1 ..." lists them per host instead), so hosts do not share cores unless
# told to. `up` first removes clusters whose creator (the pid in its state file) has died: a
# test killed by its timeout leaves nothing behind beyond the next `up`.
set -euo pipefail

STATE_ROOT=${HOSTS_STATE_DIR:-/run/strata-hosts}
SELF=$(readlink -f "$0")

# Reachable: a TCP connect to a closed port is refused (a reply), not timed out.
REACH='import socket, sys
s = socket.socket(); s.settimeout(1)
try: s.connect((sys.argv[1], 9))
except ConnectionRefusedError: sys.exit(0)
except OSError: sys.exit(1)'

die() { echo "hosts.sh: $*" >&2; exit 1; }
state() { echo "$STATE_ROOT/$1"; }
ns() { echo "$1-$2"; }  # ns CLUSTER h1 | ns CLUSTER sw

# tbf needs a bucket of at least one timer tick of the rate; 10 ms of it, at least 64 KiB.
shape() {  # shape NETNS DEV RATE
  local netns=$1 dev=$2 rate=$3
  ip netns exec "$netns" tc qdisc del dev "$dev" root 2>/dev/null || true
  [ "$rate" = none ] && return 0
  local bits
  bits=$(/usr/bin/python3 -c "import re,sys; m=re.fullmatch(r'([0-9.]+)([kmg]?)bit', sys.argv[1].lower());
sys.exit('bad rate ' + sys.argv[1]) if not m else print(int(float(m[1]) * {'':1,'k':1e3,'m':1e6,'g':1e9}[m[2]]))" "$rate")
  local burst=$(( bits / 8 / 100 ))
  [ "$burst" -lt 65536 ] && burst=65536
  ip netns exec "$netns" tc qdisc add dev "$dev" root tbf rate "$rate" burst "$burst" latency 200ms
}

core_of() {  # core_of CLUSTER K
  local cores
  read -r -a cores < "$(state "$1")/cores"
  echo "${cores[$(( ($2 - 1) % ${#cores[@]} ))]}"
}

gc() {  # clusters whose creator died
  [ -d "$STATE_ROOT" ] || return 0
  local d
  for d in "$STATE_ROOT"/*/; do
    [ -f "$d/owner" ] || continue
    local owner
    owner=$(cat "$d/owner")
    if ! kill -0 "$owner" 2>/dev/null; then
      echo "hosts.sh: removing cluster $(basename "$d") (its creator, pid $owner, is gone)" >&2
      "$SELF" down "$(basename "$d")" || true
    fi
  done
}

cmd_check() {
  [ "$(id -u)" = 0 ] || { echo "hosts.sh: namespaced hosts need root (running as uid $(id -u))"; exit 77; }
  for tool in ip tc unshare taskset mpirun; do
    command -v "$tool" >/dev/null || { echo "hosts.sh: $tool is not installed"; exit 77; }
  done
  local probe="strataprobe$$"
  if ! err=$(ip netns add "$probe" 2>&1); then echo "hosts.sh: cannot make a network namespace: $err"; exit 77; fi
  if ! err=$(ip netns exec "$probe" ip link add eth0 type veth peer name eth1 2>&1); then
    ip netns del "$probe"; echo "hosts.sh: cannot make a veth pair: $err"; exit 77
  fi
  if ! err=$(ip netns exec "$probe" tc qdisc add dev eth0 root tbf rate 1gbit burst 1mb latency 100ms 2>&1); then
    ip netns del "$probe"; echo "hosts.sh: cannot shape a link with tc tbf: $err"; exit 77
  fi
  ip netns del "$probe"
}

cmd_up() {
  local cluster=$1 n=$2 rate=${3:-none}
  [[ "$cluster" =~ ^[a-z0-9]{1,16}$ ]] || die "cluster name '$cluster': 1-16 lower-case letters and digits"
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le 16 ] || die "host count '$n': 1..16"
  gc
  local dir
  dir=$(state "$cluster")
  [ -e "$dir" ] && die "cluster $cluster exists already ($dir)"
  mkdir -p "$dir"
  echo "${HOSTS_OWNER:-$PPID}" > "$dir/owner"
  echo "$n" > "$dir/n"
  if [ -n "${HOSTS_CORES:-}" ]; then echo "$HOSTS_CORES" > "$dir/cores"
  else taskset -cp $$ | sed "s/.*: //" | /usr/bin/python3 -c "
import sys
cores = []
for part in sys.stdin.read().strip().split(','):
    a, _, b = part.partition('-')
    cores += range(int(a), int(b or a) + 1)
print(' '.join(map(str, cores)))" > "$dir/cores"; fi
  # From here on a failure removes what was made.
  trap '"$SELF" down "$cluster" >/dev/null 2>&1 || true' ERR
  local sw
  sw=$(ns "$cluster" sw)
  ip netns add "$sw"
  ip -n "$sw" link set lo up
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  local k
  for k in $(seq 1 "$n"); do
    local h
    h=$(ns "$cluster" "h$k")
    ip netns add "$h"
    ip link add eth0 netns "$h" type veth peer name "p$k" netns "$sw"
    ip -n "$sw" link set "p$k" master br0
    ip -n "$sw" link set "p$k" up
    ip -n "$h" link set lo up
    ip -n "$h" addr add "10.200.0.$k/24" dev eth0
    ip -n "$h" link set eth0 up
    shape "$h" eth0 "$rate"
    shape "$sw" "p$k" "$rate"
  done
  trap - ERR
  # Every host reaches every other (the bridge learns, the links come up).
  for k in $(seq 2 "$n"); do
    local tries=0
    until ip netns exec "$(ns "$cluster" h1)" /usr/bin/python3 -c "$REACH" "10.200.0.$k"; do
      tries=$((tries + 1))
      [ "$tries" -lt 20 ] || { "$SELF" down "$cluster"; die "h1 cannot reach h$k (10.200.0.$k)"; }
      sleep 0.2
    done
  done
}

cmd_rate() {
  local cluster=$1 k=$2 rate=$3
  shape "$(ns "$cluster" "h$k")" eth0 "$rate"
  shape "$(ns "$cluster" sw)" "p$k" "$rate"
}

cmd_link() { ip -n "$(ns "$1" "h$2")" link set eth0 "$3"; }

cmd_pids() { ip netns pids "$(ns "$1" "h$2")"; }

cmd_signal() {  # cmd_signal SIG CLUSTER K
  local p
  for p in $(ip netns pids "$(ns "$2" "h$3")"); do kill "-$1" "$p" 2>/dev/null || true; done
}

# Runs CMD on host K: its network namespace, its own hostname (hK) and its core.
cmd_exec() {
  local cluster=$1 k=$2
  shift 2
  local core
  core=$(core_of "$cluster" "$k")
  exec ip netns exec "$(ns "$cluster" "h$k")" unshare --uts taskset -c "$core" \
    sh -c 'hostname "$0" && exec "$@"' "h$k" "$@"
}

cmd_agent() {
  # mpirun calls it as ssh: [options] HOST COMMAND (one string, run by a shell, as ssh would).
  # hosts_ssh.py plays ssh and sshd, keepalives included (its header says why).
  while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done
  local host=$1
  shift
  local k=${host##*.}
  local cluster=${HOSTS_CLUSTER:?the agent runs under hosts.sh mpirun}
  [ -d "$(state "$cluster")" ] || die "agent: no cluster $cluster"
  exec /usr/bin/python3 "$(dirname "$SELF")/hosts_ssh.py" client "$(ns "$cluster" "h$k")" "$host" "$(core_of "$cluster" "$k")" "h$k" "$*"
}

cmd_mpirun() {
  local cluster=$1 slots=$2
  shift 2
  local n hostlist="" k
  n=$(cat "$(state "$cluster")/n")
  for k in $(seq 1 "$n"); do hostlist+="${hostlist:+,}10.200.0.$k:$slots"; done
  export HOSTS_CLUSTER=$cluster OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # Open MPI's session directory per cluster: hosts share /tmp, and each daemon makes its own.
  export OMPI_MCA_orte_tmpdir_base=${OMPI_MCA_orte_tmpdir_base:-$(state "$cluster")/ompi}
  mkdir -p "$OMPI_MCA_orte_tmpdir_base"
  # TCP only (no shared memory: the hosts share /dev/shm, real ones do not), over eth0 only;
  # ranks bound to nothing but their host's core (cmd_exec).
  cmd_exec "$cluster" 1 mpirun -H "$hostlist" -np $((n * slots)) --map-by node --bind-to none \
    --mca plm_rsh_agent "$SELF agent" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 "$@"
}

cmd_down() {
  local cluster=$1 dir
  dir=$(state "$cluster")
  local netns
  for netns in $(ip netns list | awk '{print $1}' | grep "^$cluster-" || true); do
    local p
    for p in $(ip netns pids "$netns" 2>/dev/null); do kill -CONT "$p" 2>/dev/null || true; kill -KILL "$p" 2>/dev/null || true; done
    ip netns del "$netns" 2>/dev/null || true
  done
  rm -rf "$dir"
}

verb=${1:-}
[ $# -gt 0 ] && shift
case "$verb" in
  check) cmd_check ;;
  up) [ $# -ge 2 ] || die "usage: up CLUSTER N [RATE]"; cmd_up "$@" ;;
  rate) [ $# -eq 3 ] || die "usage: rate CLUSTER K RATE"; cmd_rate "$@" ;;
  link) [ $# -eq 3 ] || die "usage: link CLUSTER K up|down"; cmd_link "$@" ;;
  freeze) [ $# -eq 2 ] || die "usage: freeze CLUSTER K"; cmd_signal STOP "$@" ;;
  thaw) [ $# -eq 2 ] || die "usage: thaw CLUSTER K"; cmd_signal CONT "$@" ;;
  kill) [ $# -eq 2 ] || die "usage: kill CLUSTER K"; cmd_signal CONT "$@"; cmd_signal KILL "$@" ;;
  pids) [ $# -eq 2 ] || die "usage: pids CLUSTER K"; cmd_pids "$@" ;;
  exec) [ $# -ge 3 ] || die "usage: exec CLUSTER K CMD..."; cmd_exec "$@" ;;
  mpirun) [ $# -ge 3 ] || die "usage: mpirun CLUSTER SLOTS ARGS..."; cmd_mpirun "$@" ;;
  down) [ $# -eq 1 ] || die "usage: down CLUSTER"; cmd_down "$@" ;;
  agent) cmd_agent "$@" ;;
  *) sed -n '2,30p' "$SELF" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
