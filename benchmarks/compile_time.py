"""Compile time of launch code: CPU seconds to compile the first ``@njit``
launch site of a process (its kernel compiled beforehand, a first unrelated
``@njit`` function compiled before, so Numba's own first-compile costs are
out of the figure), and to register the first ``jax_kernel`` handler of a
process (saxpy, two float32 arrays in, one out, a float32 scalar, grid and
block from a Python launch rule). Each figure is the median of fresh
processes; with no GPU, images are built for sm_90 and the launch site's
call goes to the recording driver.

    python benchmarks/compile_time.py [--runs 5] [--json out.json]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r'''
import sys, time
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
import numba
from numba import cuda
import numba_cuda_launch as ncl
if not cuda.is_available():
    ncl.set_compute_capability((9, 0))

@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

arr = numba.types.float32[::1]
saxpy.compile((arr, arr, arr, numba.types.float32))

@numba.njit
def warm(x):
    return x + 1
warm(1)

if sys.argv[1] == "site":
    @numba.njit
    def site(px, py, po, n, stream):
        x = numba.carray(ncl.as_voidptr(px), (n,), np.float32)
        y = numba.carray(ncl.as_voidptr(py), (n,), np.float32)
        o = numba.carray(ncl.as_voidptr(po), (n,), np.float32)
        saxpy[(n + 255) // 256, 256, stream](x, y, o, np.float32(2.0))
    t = time.process_time()
    site.compile((numba.types.int64,) * 5)
    print(time.process_time() - t)
else:
    import jax
    from numba_cuda_launch.jax import jax_kernel
    k = jax_kernel(saxpy, out_shapes=lambda x, y, a: x,
                   launch=lambda x, y, a: ((x.shape[0] + 255) // 256, 256),
                   scalars={"a": np.float32})
    spec = jax.ShapeDtypeStruct((1024,), np.float32)
    t = time.process_time()
    k.register(spec, spec, a=2.0)
    print(time.process_time() - t)
'''


def _measure(what, runs):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", ""))
    times = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", _CHILD, what], env=env,
                             capture_output=True, text=True, timeout=600)
        if out.returncode != 0:
            raise RuntimeError("%s: %s" % (what, out.stderr[-2000:]))
        times.append(float(out.stdout.split()[-1]))
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    result = {}
    for what, label in (("site", "first @njit launch site"), ("jax", "first jax_kernel handler")):
        try:
            times = _measure(what, args.runs)
        except RuntimeError as exc:
            if what == "jax" and "No module named 'jax'" in str(exc):
                print("%s: JAX is not installed, left out" % label)
                continue
            raise
        result[label] = {"median_s": statistics.median(times), "runs_s": times}
        print("%-28s %.3f s (median of %d: %s)" % (
            label, statistics.median(times), len(times), ", ".join("%.3f" % t for t in times)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows_s": {k: v["median_s"] for k, v in result.items()},
                       "runs": result}, f, indent=1)


if __name__ == "__main__":
    main()
