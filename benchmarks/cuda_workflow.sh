#!/usr/bin/env bash
# The workflow on a CUDA machine: several configs at once, each in its own copy of this checkout, then
# their tables, logs, per-job benchmarks and figures packed for `benchmarks/compare_runs.py`.
#
#   bash benchmarks/cuda_workflow.sh OUT NAME=CONFIG:CORES[:cpu] ...
#
# NAME=CONFIG:CORES runs `snakemake --cores CORES --configfile CONFIG` in a copy of the checkout
# ($WORK/NAME, default WORK=/tmp/papa-cuda), all NAMEs at once (give each its share of the cores); `:cpu`
# hides the GPU from that run (CUDA_VISIBLE_DEVICES=) for a CPU reference on the same machine and
# software. Each run stops after $LIMIT seconds (default 1200). Writes OUT/NAME.tar.gz (the config's
# results folder less its tokens, matrices, caches, built models and SVG copies of the figures) and
# OUT/runs.tsv (name, config, device, cores, exit status, wall seconds). Needs snakemake and the
# project's packages on PATH/PYTHONPATH. Exits 1 when a run failed or was stopped (its archive is still
# written: its snakemake.log says why), 2 on bad arguments (checked before anything is created or removed).
set -u
usage="usage: bash benchmarks/cuda_workflow.sh OUT NAME=CONFIG:CORES[:cpu] ... (e.g. /tmp/out smoke=config/smoke.yaml:4)"
root=$(cd "$(dirname "$0")/.." && pwd)
# Every argument is checked before anything is created or removed: each run starts with `rm -rf $WORK/NAME`,
# so an empty or odd NAME would remove WORK itself or a folder outside it, and a forgotten OUT would make the
# first spec the output folder and run nothing.
bad() {
    echo "cuda_workflow.sh: $1" >&2
    echo "$usage" >&2
    exit 2
}
[ $# -ge 2 ] || bad "give the output folder OUT and at least one NAME=CONFIG:CORES run"
case $1 in *=*) bad "OUT '$1' looks like a NAME=CONFIG:CORES run: give the output folder first" ;; esac
[ -n "${WORK-x}" ] || bad "WORK is empty: unset it (default /tmp/papa-cuda) or give a folder"
[[ ${LIMIT:-1200} =~ ^[1-9][0-9]*$ ]] || bad "LIMIT '${LIMIT-}' is not a whole number of seconds > 0"
names=" "
for spec in "${@:2}"; do
    [[ $spec == *=* ]] || bad "'$spec' is not NAME=CONFIG:CORES[:cpu]"
    name=${spec%%=*}
    IFS=: read -r config cores dev extra <<<"${spec#*=}"
    [[ $name =~ ^[A-Za-z0-9_.-]+$ && $name != . && $name != .. ]] ||
        bad "NAME '$name' in '$spec': give a name of letters, digits, '_', '.' or '-' (the run's folder in WORK)"
    [[ $names != *" $name "* ]] || bad "NAME '$name' is given twice: each run needs its own folder in WORK"
    names="$names$name "
    # the config as the run reads it: from inside its copy of the checkout (a path in the checkout, or absolute)
    case $config in /*) file=$config ;; *) file=$root/$config ;; esac
    [ -n "$config" ] && [ -f "$file" ] ||
        bad "CONFIG '$config' in '$spec' is not a file (give a config file of the checkout, or an absolute path)"
    # a relative path the copy leaves out (run_one's tar excludes) is there in the checkout, missing in the copy
    rel=$config
    while [[ $rel == ./* ]]; do rel=${rel#./}; done
    case $rel in .git/* | .venv/* | .snakemake/* | .dev* | results*)
        bad "CONFIG '$config' in '$spec' lies where the run's copy of the checkout leaves out (.git, .venv, .snakemake, .dev*, results*): give its absolute path" ;;
    esac
    [[ $cores =~ ^[1-9][0-9]*$ ]] || bad "CORES '$cores' in '$spec': give a whole number of cores > 0"
    [ -z "$dev" ] || [ "$dev" = cpu ] || [ "$dev" = gpu ] || bad "'$dev' in '$spec': give :cpu (or nothing) after CORES"
    [ -z "$extra" ] || bad "'$spec' has more than NAME=CONFIG:CORES[:cpu]"
done
mkdir -p "$1" || exit
out=$(cd "$1" && pwd) # absolute: each run packs its results from inside its own copy
shift
work=${WORK:-/tmp/papa-cuda}
limit=${LIMIT:-1200}
mkdir -p "$work" || exit
printf 'name\tconfig\tdevice\tcores\trc\twall_s\n' >"$out/runs.tsv"
run_one() {
    local name=$1 config=$2 cores=$3 dev=$4 dir=$work/$1 t0 rc results
    rm -rf "$dir" && mkdir -p "$dir"
    (cd "$root" && tar cf - --exclude=./.git --exclude='./.dev*' --exclude=./.venv --exclude=./.snakemake \
        --exclude='./results*' .) | (cd "$dir" && tar xf -)
    t0=$(date +%s)
    if [ "$dev" = cpu ]; then
        (cd "$dir" && CUDA_VISIBLE_DEVICES= timeout "$limit" snakemake --cores "$cores" --configfile "$config") >"$dir/snakemake.log" 2>&1
    else
        (cd "$dir" && timeout "$limit" snakemake --cores "$cores" --configfile "$config") >"$dir/snakemake.log" 2>&1
    fi
    rc=$?
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$config" "$dev" "$cores" "$rc" "$(($(date +%s) - t0))" >>"$out/runs.tsv"
    # the results folder as the workflow reads it (schema default, quotes): papa.checks.load_config
    results=$(cd "$dir" && python3 -c 'import sys; from papa.checks import load_config
print(load_config(sys.argv[1])["results"])' "$config" 2>/dev/null) || results=results
    (cd "$dir" && tar czf "$out/$name.tar.gz" --exclude="*.svg" snakemake.log \
        $(cd "$dir" && ls -d "$results"/tables "$results"/benchmarks "$results"/logs "$results"/plots 2>/dev/null)) ||
        return 1
    return "$rc"
}
pids=() runs=()
for spec in "$@"; do
    name=${spec%%=*}
    IFS=: read -r config cores dev <<<"${spec#*=}"
    run_one "$name" "$config" "$cores" "${dev:-gpu}" &
    pids+=("$!") runs+=("$name")
done
# each run's own status (a plain `wait` returns 0 whatever the runs did): snakemake's, or 1 when its copy or
# its archive failed
failed=()
for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || failed+=("${runs[$i]}")
done
column -t "$out/runs.tsv" 2>/dev/null || cat "$out/runs.tsv"
if [ ${#failed[@]} -gt 0 ]; then
    echo "cuda_workflow.sh: ${#failed[@]} run(s) failed or were stopped (rc 124: after LIMIT=$limit s): ${failed[*]};" \
        "what they have is packed in $out (see each one's snakemake.log)" >&2
    exit 1
fi
