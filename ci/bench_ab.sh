#!/usr/bin/env bash
# Benchmarks of this checkout against an earlier revision, on one GPU machine,
# runs interleaved (base, head, base, head) so drift hits both alike:
#
#   git archive REV numba_cuda_launch benchmarks tests/support | tar -x -C .bench/base   # here
#   bash ci/bench_ab.sh BENCH [BENCH ...]      # GPU machine, carrying .bench/
#
# BENCH is a file of benchmarks/ without .py (devicearray_overhead,
# launch_overhead, graphs, jax_overhead, ...). Each run's JSON goes to
# $OUT/ab/NAME.{base,head}.N.json; a table of the rows follows (median of the
# runs, head/base). The base runs its own copy of the benchmark (tests/support
# holds the call frames jax_overhead builds in memory).
set -u
source "$(dirname "$0")/gpu_env.sh"
HEAD_TREE="$PWD"
BASE_TREE="$PWD/.bench/base"
RUNS="${RUNS:-2}"
mkdir -p "$OUT/ab"
for name in "$@"; do
  for i in $(seq "$RUNS"); do
    for side in base head; do
      tree="$HEAD_TREE"; [ "$side" = base ] && tree="$BASE_TREE"
      (cd "$tree" && PYTHONPATH="$tree:$HEAD_TREE/ci/gpu_shim:/tmp/site" timeout "${AB_TIMEOUT:-150}" \
        python3 "benchmarks/$name.py" --json "$OUT/ab/$name.$side.$i.json" ${AB_ARGS:-} \
        > "$OUT/ab/$name.$side.$i.log" 2>&1) || echo "$name $side $i: exit $?"
    done
  done
done
python3 "$(dirname "$0")/bench_ab_table.py" "$OUT/ab" | tee "$OUT/ab/table.md"
