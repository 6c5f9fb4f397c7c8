"""Images for several architectures on a GPU: an image holding no cubin of
the device's architecture runs from its PTX (the driver compiles it at
load), launched from @njit, from a @cfunc, from cached code in a new process
that did not ask for the list, and from a C library built by
numba_cuda_launch.aot. Results are compared with NumPy, outputs poisoned
with NaN first."""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cfunc, cuda, njit
from numba.core import types as nt

import numba_cuda_launch as ncl
from numba_cuda_launch import config
from numba_cuda_launch.cudadrv import fatbin

from support.childenv import PREAMBLE, child_env

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
N = 4099


def device_cc():
    return tuple(cuda.get_current_device().compute_capability)


def older_architecture():
    """A listed architecture older than the device's family, so that only
    the PTX can run here."""
    cc = device_cc()
    if cc[0] <= 8:
        pytest.skip("the device (%d.%d) is not newer than sm_80" % cc)
    return (8, 0)


@pytest.fixture
def architectures():
    before = config._configured
    yield ncl.set_compute_capability
    config._configured = before


@cuda.jit
def axpy_out(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def inputs(seed=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    return np.float32(rng.uniform(0.5, 2.0)), x, y


def test_an_image_without_the_device_cubin_runs_from_its_ptx(architectures):
    architectures([older_architecture()])
    handle = ncl.kernel_handle(axpy_out, "void(float32[::1], float32, float32[::1], "
                                         "float32[::1])")
    entries = fatbin.fatbin_entries(handle.image)
    assert [(e.kind, e.cc) for e in entries] == [("cubin", (8, 0)), ("ptx", (8, 0))]

    @njit
    def go(out, a, x, y):
        axpy_out[(out.size + 127) // 128, 128](out, a, x, y)

    a, x, y = inputs()
    dout = cuda.to_device(np.full(N, np.nan, np.float32))
    go(dout, a, cuda.to_device(x), cuda.to_device(y))
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-5)


def test_a_cfunc_launches_an_image_of_several_architectures(architectures):
    architectures([older_architecture(), device_cc()])

    @cuda.jit(nt.void(nt.CPointer(nt.float32), nt.float32, nt.CPointer(nt.float32),
                      nt.CPointer(nt.float32), nt.int64))
    def axpy_ptr(out, a, x, y, n):
        i = cuda.grid(1)
        if i < n:
            out[i] = a * x[i] + y[i]

    @cfunc(nt.int32(nt.voidptr, nt.float32, nt.voidptr, nt.voidptr, nt.int64))
    def launch(outp, a, xp, yp, n):
        return axpy_ptr[(n + 127) // 128, 128].launch_status(outp, a, xp, yp, n)

    a, x, y = inputs()
    dout, dx, dy = (cuda.to_device(v) for v in (np.full(N, np.nan, np.float32), x, y))
    addr = [d.device_ctypes_pointer.value for d in (dout, dx, dy)]
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_float, ctypes.c_void_p,
                          ctypes.c_void_p, ctypes.c_int64)(launch.address)
    assert fn(addr[0], a, addr[1], addr[2], N) == 0
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-5)


CACHE_MODULE = """
import numba, numpy as np
from numba import cuda, njit
import numba_cuda_launch as ncl

@cuda.jit
def axpy_cached(out, a, x, y):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

@njit(cache=True)
def run(out, a, x, y):
    axpy_cached[(out.size + 127) // 128, 128](out, a, x, y)
"""

CACHE_MAIN = """
import numpy as np
from numba import cuda
import cachemod
rng = np.random.default_rng()
x, y = (rng.standard_normal(1000).astype(np.float32) for _ in range(2))
out = cuda.to_device(np.full(1000, np.nan, np.float32))
cachemod.run(out, np.float32(1.5), cuda.to_device(x), cuda.to_device(y))
err = float(np.max(np.abs(out.copy_to_host() - (1.5 * x + y))))
print(err, sum(cachemod.run.stats.cache_hits.values()))
"""


def test_cached_code_with_only_ptx_for_the_device_runs_in_a_new_process(tmp_path):
    older_architecture()
    (tmp_path / "cachemod.py").write_text(CACHE_MODULE)

    def run(**env):
        out = subprocess.run([sys.executable, "-c", PREAMBLE + CACHE_MAIN], cwd=tmp_path,
                             env=child_env(**env), capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        err, hits = out.stdout.split()[-2:]
        return float(err), int(hits)

    err, hits = run(NUMBA_CUDA_LAUNCH_CC="8.0;")  # sm_80 cubin and its PTX
    assert err < 1e-5 and hits == 0
    err, hits = run(NUMBA_CUDA_LAUNCH_CC="")  # nothing asked: the device's architecture
    assert err < 1e-5 and hits == 1  # the cached code, its PTX compiled for this device


def test_a_c_library_with_only_ptx_for_the_device(tmp_path):
    older_architecture()
    lib = tmp_path / "libsaxpy.so"
    done = subprocess.run([sys.executable, "-m", "numba_cuda_launch.aot", str(lib),
                           "saxpy_launch=aot_kernels:saxpy_launch", "--cc", "8.0;",
                           "--header", str(tmp_path / "saxpy.h")],  # main.c's include
                          cwd=HERE, env=child_env(), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert "kernels for sm_80 + compute_80 PTX" in (tmp_path / "saxpy.h").read_text()
    exe = str(tmp_path / "saxpy")
    subprocess.run(["cc", "-O2", "-I", str(tmp_path), os.path.join(ROOT, "examples", "clib",
                                                                   "main.c"),
                    "-L", str(tmp_path), "-lsaxpy", "-Wl,-rpath," + str(tmp_path), "-ldl",
                    "-lm", "-o", exe], check=True, capture_output=True)
    out = subprocess.run([exe, "100003"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "saxpy: 100003 elements, 0 wrong" in out.stdout
