#!/usr/bin/env bash
# GPU-machine run for CUDA graphs, thread-block clusters and occupancy:
# tests/test_graphs_gpu.py (with the recording-driver tests of
# tests/test_graphs_cpu.py) and benchmarks/graphs.py. Writes logs, the
# benchmark's JSON and its plot under $OUT (or ./gpu-out). About 2-4 minutes
# on an H200; each step is bounded so the whole stays under 5.
set -u
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
echo "== graph, cluster and occupancy tests"
timeout 150 python3 -m pytest -q -rfEsP -p no:cacheprovider -n 4 \
  tests/test_graphs_gpu.py tests/test_graphs_cpu.py 2>&1 | tee "$OUT/graphs_tests.log" | tail -60
echo "exit ${PIPESTATUS[0]}"
echo "== graphs benchmark"
timeout 170 python3 benchmarks/graphs.py --json "$OUT/graphs_bench.json" \
  --plot "$OUT/graphs_bench.png" 2>&1 | tee "$OUT/graphs_bench.log"
echo "exit ${PIPESTATUS[0]}"
