#!/usr/bin/env bash
# One GPU-machine run: install, GPU + CPU tests, the main example, the
# benchmarks. Writes logs and results under $OUT (or ./gpu-out).
# Wheels in .whl/ (e.g. numpy<2.5 for numba-cuda 0.30.4) are installed first.
set -u
source "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 - <<'PY'
import numpy, numba, llvmlite, sys
from importlib.metadata import version
print("python", sys.version.split()[0], "numpy", numpy.__version__, "numba", numba.__version__,
      "llvmlite", llvmlite.__version__, "numba-cuda", version("numba-cuda"),
      "cuda-bindings", version("cuda-bindings"))
PY
echo "== tests"
python3 -m pytest -q -rfEs -p no:cacheprovider -n 8 tests ${PYTEST_ARGS:-} 2>&1 | tee "$OUT/tests.log" | tail -40
echo "== example"
python3 examples/seed_cfunc.py 2>&1 | tee "$OUT/example.log"
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "== benchmarks"
  python3 benchmarks/launch_overhead.py --json "$OUT/bench.json" --plot "$OUT/bench.png" \
    2>&1 | tee "$OUT/bench.log"
fi
if [ -z "${SKIP_BENCH:-}" ]; then
  echo "== JAX examples and benchmark"
  python3 examples/jax_saxpy.py 2>&1 | tee "$OUT/jax_example.log"
  python3 examples/jax_legacy_custom_call.py 2>&1 | tail -3 | tee "$OUT/jax_legacy.log"
  python3 benchmarks/jax_overhead.py --json "$OUT/jax_bench.json" 2>&1 | tee "$OUT/jax_bench.log"
fi
