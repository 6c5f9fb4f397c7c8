"""Launch cost of a C library built by numba_cuda_launch.aot (docs/aot.md).

Builds examples/clib's libsaxpy.so (timing the build and reporting the
library's size), writes the same kernel's cubin, compiles
benchmarks/aot_launch.c and runs it: one C process, no Python, timing a
cuLaunchKernel loop of that cubin and the library's saxpy_launch loop, in
interleaved batches (medians of host microseconds per launch). Needs a GPU
for the run; without one it reports the build only.

    python benchmarks/aot_launch.py [--json out.json]
"""

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4 with numpy 2.5
    np.row_stack = np.vstack

from numba import cuda  # noqa: E402
from numba.core import types as nt  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import aot  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _example():
    spec = importlib.util.spec_from_file_location(
        "clib_build", os.path.join(ROOT, "examples", "clib", "build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--batches", type=int, default=200)
    args = parser.parse_args()
    ex = _example()
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        lib = aot.build(os.path.join(tmp, "libsaxpy.so"), {"saxpy_launch": ex.saxpy_launch},
                        header=os.path.join(tmp, "saxpy.h"))
        result["build_s"] = round(time.perf_counter() - t0, 3)
        result["library_bytes"] = os.path.getsize(lib.path)
        result["build_info"] = lib.build_info
        print("built in %.2f s (launcher already compiled), %d bytes"
              % (result["build_s"], result["library_bytes"]))
        if not cuda.is_available():
            print("no GPU: launch cost not measured")
        else:
            h = ncl.kernel_handle(ex.saxpy, (ex.f32p, ex.f32p, nt.float32, nt.int64))
            cubin = os.path.join(tmp, "saxpy.cubin")
            with open(cubin, "wb") as f:
                f.write(h.image)
            exe = os.path.join(tmp, "aot_launch")
            subprocess.run([os.environ.get("CC") or shutil.which("cc"), "-O2", "-I", tmp,
                            os.path.join(ROOT, "benchmarks", "aot_launch.c"), "-L", tmp,
                            "-lsaxpy", "-Wl,-rpath," + tmp, "-ldl", "-o", exe], check=True)
            out = subprocess.run([exe, cubin, h.entry_name, str(args.batches)], check=True,
                                 capture_output=True, text=True).stdout
            result.update(json.loads(out))
            print("C cuLaunchKernel loop %.2f us, library launcher %.2f us per launch: %.3fx"
                  % (result["c_cuLaunchKernel_us"], result["library_us"], result["ratio"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
