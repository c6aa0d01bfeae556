#!/usr/bin/env bash
# Single-node Slurm test cluster on 127.0.0.1 (Debian/Ubuntu, run as root).
#
#   scripts/slurm-cluster.sh start    install packages if missing, write
#                                     /etc/slurm/slurm.conf, start munged,
#                                     slurmctld, slurmd; wait until the node is idle
#   scripts/slurm-cluster.sh stop     stop every daemon that `start` started
#   scripts/slurm-cluster.sh status   sinfo + squeue
#
# Meant for tests/CI and for trying the Snakemake profile (`snakemake --profile
# slurm`) on a laptop or VM. It is NOT a production setup: no accounting
# (slurmdbd), no cgroups (ProctrackType=proctrack/linuxproc, TaskPlugin=task/none),
# no GPUs (GRES), one partition.
#
# Both `start` and `stop` are idempotent. `start` records the pids of the
# daemons it started in $PAPA_SLURM_RUN_DIR (default /run/papa-slurm); `stop`
# stops only those (a munged that was already running, e.g. from systemd, is
# used and left alone).
#
# Environment:
#   PAPA_SLURM_WAIT      seconds to wait for the node to become idle (default 60)
#   PAPA_SLURM_FORCE=1   overwrite an /etc/slurm/slurm.conf this script did not
#                        write (a backup copy is kept next to it)
#   PAPA_SLURM_MEM_MARGIN_MB  memory kept back from RealMemory (default: 10 %
#                        of MemTotal, at least 512 MB)
set -euo pipefail

CONF_DIR=/etc/slurm
CONF=$CONF_DIR/slurm.conf
MARKER="# written by papa scripts/slurm-cluster.sh"
RUN_DIR=${PAPA_SLURM_RUN_DIR:-/run/papa-slurm}
LOG_DIR=/var/log/slurm
CTLD_STATE=/var/spool/slurmctld
SLURMD_SPOOL=/var/spool/slurmd
DAEMON_PID_DIR=/run/slurm
WAIT_S=${PAPA_SLURM_WAIT:-60}
PACKAGES=(slurmctld slurmd slurm-client munge)

log() { printf '[slurm-cluster] %s\n' "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

need_root() {
    [[ $(id -u) -eq 0 ]] || die "must run as root (it installs packages and starts daemons)"
}

node_name() {
    local n
    n=$(hostname -s 2>/dev/null || true)
    # a node name must be a plain host name
    if [[ -z $n || ! $n =~ ^[A-Za-z0-9][A-Za-z0-9_-]*$ ]]; then
        n=localhost
    fi
    printf '%s' "$n"
}

# ---------------------------------------------------------------- packages
install_packages() {
    local missing=0 b
    for b in slurmctld slurmd sinfo sbatch squeue munged; do
        command -v "$b" >/dev/null 2>&1 || [[ -x /usr/sbin/$b ]] || missing=1
    done
    [[ $missing -eq 0 ]] && return 0
    command -v apt-get >/dev/null 2>&1 || die "Slurm is not installed and apt-get is not available"
    export DEBIAN_FRONTEND=noninteractive
    log "installing ${PACKAGES[*]}"
    # apt-get update only when the install fails without it (empty/stale lists)
    if ! apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >/tmp/papa-slurm-apt.log 2>&1; then
        log "install failed with the current package lists; running apt-get update"
        apt-get update -q >>/tmp/papa-slurm-apt.log 2>&1 || { tail -n 30 /tmp/papa-slurm-apt.log >&2; die "apt-get update failed"; }
        apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >>/tmp/papa-slurm-apt.log 2>&1 \
            || { tail -n 30 /tmp/papa-slurm-apt.log >&2; die "apt-get install ${PACKAGES[*]} failed"; }
    fi
}

# ---------------------------------------------------------------- config
render_conf() {
    local node cpus mem_kb mem_mb margin
    node=$(node_name)
    cpus=$(nproc)
    mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
    mem_mb=$((mem_kb / 1024))
    margin=${PAPA_SLURM_MEM_MARGIN_MB:-$((mem_mb / 10))}
    ((margin < 512)) && margin=512
    mem_mb=$((mem_mb - margin))
    ((mem_mb < 256)) && mem_mb=256
    cat <<EOF
$MARKER
# Single-node test cluster; regenerate with: scripts/slurm-cluster.sh start
ClusterName=papa
SlurmctldHost=${node}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
# no cgroups: works in containers and on CI runners
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# finished jobs stay visible to squeue for 300 s: the Snakemake slurm executor
# (slurm-status-command: squeue) needs MinJobAge >= 3 x its init seconds
MinJobAge=300
SlurmctldTimeout=30
SlurmdTimeout=60
InactiveLimit=0
KillWait=5
Waittime=0
StateSaveLocation=${CTLD_STATE}
SlurmdSpoolDir=${SLURMD_SPOOL}
SlurmctldPidFile=${DAEMON_PID_DIR}/slurmctld.pid
SlurmdPidFile=${DAEMON_PID_DIR}/slurmd.pid
SlurmctldLogFile=${LOG_DIR}/slurmctld.log
SlurmdLogFile=${LOG_DIR}/slurmd.log
SlurmctldPort=6817
SlurmdPort=6818
NodeName=${node} NodeAddr=127.0.0.1 CPUs=${cpus} RealMemory=${mem_mb} State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

# prints "changed" when the file was (re)written
write_conf() {
    mkdir -p "$CONF_DIR"
    local new
    new=$(render_conf)
    if [[ -f $CONF ]]; then
        if ! grep -qxF "$MARKER" "$CONF"; then
            if [[ ${PAPA_SLURM_FORCE:-0} != 1 ]]; then
                die "$CONF exists and was not written by this script; set PAPA_SLURM_FORCE=1 to replace it (a backup is kept)"
            fi
            cp -p "$CONF" "$CONF.bak.$(date +%Y%m%d%H%M%S)"
        elif [[ $(cat "$CONF") == "$new" ]]; then
            return 0
        fi
    fi
    printf '%s\n' "$new" >"$CONF"
    chmod 644 "$CONF"
    log "wrote $CONF"
    echo changed
}

munge_key() {
    local key=/etc/munge/munge.key
    [[ -s $key ]] && return 0
    log "creating munge key"
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null 2>&1; then
        mungekey --create --keyfile="$key" --force >/dev/null
    else
        dd if=/dev/urandom of="$key" bs=1024 count=1 status=none
    fi
    chown munge:munge "$key" 2>/dev/null || true
    chmod 400 "$key"
}

# ---------------------------------------------------------------- processes
# pid_alive PID NAME: the pid runs a process whose command name is NAME
pid_alive() {
    local pid=$1 name=$2
    [[ -n $pid && -r /proc/$pid/comm ]] || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$name" ]]
}

recorded_pid() { cat "$RUN_DIR/$1.pid" 2>/dev/null || true; }

# running_pid NAME: pid of a running daemon NAME (recorded one first)
running_pid() {
    local name=$1 pid
    pid=$(recorded_pid "$name")
    if pid_alive "$pid" "$name"; then echo "$pid"; return 0; fi
    pid=$(pgrep -x "$name" | head -n 1 || true)
    [[ -n $pid ]] && echo "$pid"
    return 0
}

# wait_pidfile FILE NAME: wait for a daemon's own pid file, print the pid
wait_pidfile() {
    local file=$1 name=$2 i pid
    for ((i = 0; i < 100; i++)); do
        pid=$(cat "$file" 2>/dev/null || true)
        if pid_alive "$pid" "$name"; then echo "$pid"; return 0; fi
        sleep 0.1
    done
    pid=$(pgrep -x "$name" | head -n 1 || true)
    [[ -n $pid ]] && { echo "$pid"; return 0; }
    return 1
}

log_tails() {
    local f
    for f in "$LOG_DIR/slurmctld.log" "$LOG_DIR/slurmd.log" /var/log/munge/munged.log; do
        [[ -f $f ]] || continue
        printf '\n==== tail %s ====\n' "$f" >&2
        tail -n 25 "$f" >&2
    done
}

start_munged() {
    local pid
    pid=$(running_pid munged)
    if [[ -n $pid ]]; then
        log "munged already running (pid $pid)"
        return 0
    fi
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    chown munge:munge /run/munge /var/log/munge /var/lib/munge 2>/dev/null || true
    chmod 755 /run/munge
    if id munge >/dev/null 2>&1; then
        runuser -u munge -- /usr/sbin/munged
    else
        /usr/sbin/munged --force
    fi
    pid=$(wait_pidfile /run/munge/munged.pid munged) || { log_tails; die "munged did not start"; }
    echo "$pid" >"$RUN_DIR/munged.pid"
    log "started munged (pid $pid)"
}

start_slurm_daemon() {
    local name=$1 pid
    shift
    pid=$(running_pid "$name")
    if [[ -n $pid ]]; then
        log "$name already running (pid $pid)"
        return 0
    fi
    "/usr/sbin/$name" "$@" || { log_tails; die "$name failed to start"; }
    pid=$(wait_pidfile "$DAEMON_PID_DIR/$name.pid" "$name") || { log_tails; die "$name did not start"; }
    echo "$pid" >"$RUN_DIR/$name.pid"
    log "started $name (pid $pid)"
}

stop_one() {
    local name=$1 pid i
    pid=$(recorded_pid "$name")
    rm -f "$RUN_DIR/$name.pid"
    pid_alive "$pid" "$name" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
        pid_alive "$pid" "$name" || { log "stopped $name (pid $pid)"; return 0; }
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    log "killed $name (pid $pid)"
}

node_state() { sinfo -h -N -o '%T' 2>/dev/null | head -n 1 || true; }

wait_idle() {
    local deadline=$((SECONDS + WAIT_S)) state="" node resumed=0
    node=$(node_name)
    while ((SECONDS < deadline)); do
        state=$(node_state)
        case $state in
            idle | mixed | allocated | completing) log "node $node is $state"; return 0 ;;
            down* | drain* | fail*)
                if [[ $resumed -eq 0 ]]; then
                    scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
                    resumed=1
                fi
                ;;
        esac
        sleep 1
    done
    log "node $node not idle after ${WAIT_S}s (state: '${state:-none}')"
    sinfo -N -l >&2 2>&1 || true
    log_tails
    return 1
}

# ---------------------------------------------------------------- commands
cmd_start() {
    need_root
    install_packages
    mkdir -p "$RUN_DIR" "$LOG_DIR" "$CTLD_STATE" "$SLURMD_SPOOL" "$DAEMON_PID_DIR"
    local changed
    changed=$(write_conf)
    if [[ $changed == changed && ( -n $(running_pid slurmctld) || -n $(running_pid slurmd) ) ]]; then
        log "configuration changed: restarting the Slurm daemons this script started"
        stop_one slurmd
        stop_one slurmctld
    fi
    munge_key
    start_munged
    # -i: ignore saved state that does not match the current node definition
    start_slurm_daemon slurmctld -i
    start_slurm_daemon slurmd -N "$(node_name)"
    wait_idle || die "cluster did not come up"
    log "cluster ready: partition main, node $(node_name); stop with: $0 stop"
}

cmd_stop() {
    # never fails: stops only what `start` recorded
    if [[ $(id -u) -ne 0 ]]; then
        log "not root: nothing to stop"
        return 0
    fi
    stop_one slurmd || true
    stop_one slurmctld || true
    stop_one munged || true
    return 0
}

cmd_status() {
    local n pid
    for n in munged slurmctld slurmd; do
        pid=$(running_pid "$n")
        if [[ -n $pid ]]; then
            if [[ $(recorded_pid "$n") == "$pid" ]]; then
                echo "$n: running (pid $pid, started by this script)"
            else
                echo "$n: running (pid $pid)"
            fi
        else
            echo "$n: not running"
        fi
    done
    command -v sinfo >/dev/null 2>&1 || { echo "sinfo: not installed"; return 1; }
    sinfo || return 1
    squeue || return 1
}

case ${1:-} in
    start) cmd_start ;;
    stop) cmd_stop ;;
    status) cmd_status ;;
    *)
        echo "usage: $0 start|stop|status" >&2
        exit 2
        ;;
esac
