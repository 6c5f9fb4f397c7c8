"""How much of the package one new launch site runs: compiling an ``@njit``
launcher of a numba-cuda or numba-cuda-mlir kernel (each installed
compiler's) over ``carray`` views (kernels compiled
beforehand, a warm-up launcher first, the recording driver, images for
sm_90) runs code in at most 17 of the package's modules and calls at most 26
of its functions more than once (README.md, "How it is built"). Counted with
``sys.setprofile`` in a child process; the counter is shown able to fail."""

import json
import subprocess
import sys
import textwrap

import pytest

from numba_cuda_launch.compat.versions import has_numba_cuda_mlir
from support import HAVE_NUMBA_CUDA
from support.childenv import PREAMBLE, child_env

pytestmark = pytest.mark.slow

# measured 2026-12-05 on this CPU: 17 modules for either compiler, 25
# functions for numba-cuda's kernels and 26 for numba-cuda-mlir's. Two
# modules came with numba-cuda becoming one kernel source among equals
# (compat/cuda_target.py, kernels/__init__.py), and the package's __getattr__
# (names loaded on demand) answers Numba's attribute probes of the package
# module (misses, no work); with numba-cuda-mlir imported, Numba's inlining
# pass asks the package about each call it could inline (numba-cuda-mlir's
# kernels are not inlined into CPU code) (docs/architecture.md).
MAX_MODULES = 17
MAX_REPEATED = 26

_TRACE = PREAMBLE + textwrap.dedent('''
    import collections, json, os, sys
    import numba
    import numpy as np
    import numba_cuda_launch as ncl
    from numba_cuda_launch.compat.cuda_target import gpu_available
    from numba_cuda_launch.testing import RecordingDriver

    if not gpu_available():
        ncl.set_compute_capability((9, 0))
    %s

    @cuda.jit
    def fill(out, value):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = value

    @cuda.jit
    def axpy(out, x, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + out[i]

    vec, f32 = %s
    fill.compile((vec, f32))
    axpy.compile((vec, vec, f32))

    @numba.njit
    def warm(address, n, stream):
        out = numba.carray(ncl.as_voidptr(address), (n,), np.float32)
        fill[(n + 127) // 128, 128, stream](out, np.float32(1.5))

    @numba.njit
    def site(out_address, x_address, n, stream):
        out = numba.carray(ncl.as_voidptr(out_address), (n,), np.float32)
        x = numba.carray(ncl.as_voidptr(x_address), (n,), np.float32)
        axpy[(n + 127) // 128, 128, stream](out, x, np.float32(2.5))

    package = os.path.dirname(ncl.__file__) + os.sep
    calls = collections.Counter()

    def profile(frame, event, arg):
        if event == "call" and frame.f_code.co_filename.startswith(package):
            code = frame.f_code
            calls[(code.co_filename[len(package):], code.co_firstlineno, code.co_name)] += 1

    with RecordingDriver() as rec:
        warm(0x7F0000000000, 1000, 0x1234)
        sys.setprofile(profile)
        try:
            site.compile((numba.types.int64,) * 4)
        finally:
            sys.setprofile(None)
        site(0x7F0000000000, 0x7F0000100000, 1000, 0x1234)
        assert [l.grid for l in rec.launches] == [(8, 1, 1)] * 2
    print(json.dumps([[f, line, name, n] for (f, line, name), n in calls.items()]))
''')


# Each compiler's kernels: its cuda module, its types of the kernels' parameters.
COMPILERS = {
    "numba-cuda": ("from numba import cuda",
                   "numba.types.float32[::1], numba.types.float32"),
    "numba-cuda-mlir": ("from numba_cuda_mlir import cuda; from numba_cuda_mlir import types as mt",
                        "mt.float32[::1], mt.float32"),
}
INSTALLED = [c for c in COMPILERS if (c == "numba-cuda" and HAVE_NUMBA_CUDA) or
             (c == "numba-cuda-mlir" and has_numba_cuda_mlir())]


def _trace(compiler):
    out = subprocess.run([sys.executable, "-c", _TRACE % COMPILERS[compiler]], env=child_env(),
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return [tuple(row) for row in json.loads(out.stdout.strip().splitlines()[-1])]


def modules_and_repeats(calls):
    """``(modules run, functions called more than once)`` of trace rows
    ``(file, line, name, calls)``."""
    modules = {f for f, _, _, _ in calls}
    repeated = sorted("%s:%d %s (%d)" % (f, line, name, n)
                      for f, line, name, n in calls if n > 1)
    return modules, repeated


@pytest.mark.parametrize("compiler", INSTALLED)
def test_a_new_launch_site_runs_little_of_the_package(compiler):
    modules, repeated = modules_and_repeats(_trace(compiler))
    assert len(modules) <= MAX_MODULES, "%d modules: %s" % (len(modules), sorted(modules))
    assert len(repeated) <= MAX_REPEATED, "%d functions called more than once:\n%s" % (
        len(repeated), "\n".join(repeated))


def test_the_count_can_fail():
    rows = [("a.py", 1, "f", 3), ("a.py", 9, "g", 1), ("b.py", 4, "h", 2)]
    modules, repeated = modules_and_repeats(rows)
    assert modules == {"a.py", "b.py"} and repeated == ["a.py:1 f (3)", "b.py:4 h (2)"]
    many = [("m%d.py" % i, 1, "f", 2) for i in range(MAX_MODULES + 1)]
    modules, repeated = modules_and_repeats(many)
    assert len(modules) > MAX_MODULES and len(repeated) > MAX_REPEATED - MAX_MODULES
