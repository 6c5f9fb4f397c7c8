"""What importing the package changes (nothing but CPU-target typing), the
generated code, and cache=True across processes."""

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
from numba import cuda, njit

import numba_cuda_launch as ncl
from childenv import PREAMBLE, child_env  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, cwd=None):
    out = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(code)], cwd=cwd,
                         env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


PTX_PROGRAM = """
    import hashlib, sys
    import numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    if sys.argv[-1] == "import":
        import numba_cuda_launch
    from numba import cuda
    from numba.core import types

    def kern(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] * 2 + 1

    sig = (types.float32[::1], types.float32[::1])
    ptx, _ = cuda.compile_ptx(kern, sig, cc=(9, 0))
    print(hashlib.sha256(ptx.encode()).hexdigest())
    disp = cuda.jit(kern)
    print(type(disp[4, 32]).__name__, type(disp[4, 32, 0, 16]).__name__)
"""


def test_import_changes_nothing_for_cuda_code():
    def run(flag):
        code = PTX_PROGRAM + "\n"
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), flag],
                             env=child_env(), capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n")

    without, with_pkg = run("plain"), run("import")
    assert without[0] == with_pkg[0]  # same PTX for device code
    assert without[1] == with_pkg[1] == "_LaunchConfiguration _LaunchConfiguration"


@cuda.jit
def ir_kernel(x, n):
    pass


@njit
def ir_launch(p, n, stream):
    x = numba.carray(ncl.as_voidptr(p), (n,), np.float32)
    return ir_kernel[(n + 255) // 256, 256, stream].launch_status(x, n)


def test_generated_ir_is_a_direct_driver_call():
    ir_launch(0x10, 4, 0)
    (ir,) = ir_launch.inspect_llvm().values()
    body = ir[ir.index("define"):]
    assert "numba_cuda_launch_driver_table" in body
    assert "numba_cuda_launch_image_" in body and "numba_cuda_launch_slot_" in body
    # No Python, GIL or heap allocation on the launch path.
    for forbidden in ("PyGILState", "NRT_MemInfo_alloc", "malloc", "PyObject"):
        assert forbidden not in body.split("define")[1], forbidden
    asm = list(ir_launch.inspect_asm().values())[0]
    assert "load atomic" not in asm  # (sanity: this is machine code)


CACHE_MODULE = """
import numba, numpy as np
if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4 with numpy 2.5
    np.row_stack = np.vstack
from numba import cuda
import numba_cuda_launch as ncl
if not cuda.is_available():
    ncl.set_compute_capability((9, 0))

@cuda.jit
def k(x):
    x[0] = 1

@numba.njit(cache=True)
def go(p):
    x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
    return k[1, 1].launch_status(x)
"""


def test_cache_true_across_processes(tmp_path):
    (tmp_path / "cached_launch.py").write_text(CACHE_MODULE)
    probe = """
        import cached_launch as m
        from numba_cuda_launch.testing import RecordingDriver
        with RecordingDriver() as fake:
            status = m.go(16)
        print(status, len(fake.launches), sum(m.go.stats.cache_hits.values()))
    """
    code = textwrap.dedent(probe)
    first = run_python(code, cwd=tmp_path).split()
    second = run_python(code, cwd=tmp_path).split()
    assert first == ["0", "1", "0"]
    assert second == ["0", "1", "1"]  # loaded from the cache, launched again
