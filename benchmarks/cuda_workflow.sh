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
# project's packages on PATH/PYTHONPATH.
set -u
mkdir -p "$1" || exit
out=$(cd "$1" && pwd) # absolute: each run packs its results from inside its own copy
shift
work=${WORK:-/tmp/papa-cuda}
limit=${LIMIT:-1200}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$work"
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
        $(cd "$dir" && ls -d "$results"/tables "$results"/benchmarks "$results"/logs "$results"/plots 2>/dev/null))
}
for spec in "$@"; do
    name=${spec%%=*}
    rest=${spec#*=}
    IFS=: read -r config cores dev <<<"$rest"
    run_one "$name" "$config" "${cores:-1}" "${dev:-gpu}" &
done
wait
column -t "$out/runs.tsv" 2>/dev/null || cat "$out/runs.tsv"
