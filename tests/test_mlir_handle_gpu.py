"""kernel_handle() of a numba-cuda-mlir kernel, launched on a GPU with a
plain cuLaunchKernel (through ctypes, as C code would) from the parameters
it lists, checked against NumPy on random inputs; the output is poisoned
(NaN) first."""

import ctypes

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda
from numba.core import types as nt

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_mlir import cuda as mcuda  # noqa: E402

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


@mcuda.jit
def axpy(out, a, x, y):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i] + y[i]


def _memref(name, devarray):
    """The C values of a 1-D array's memref parameters, by parameter name."""
    data, n = devarray.__cuda_array_interface__["data"][0], devarray.shape[0]
    fields = {"allocated": ctypes.c_uint64(data), "aligned": ctypes.c_uint64(data),
              "offset": ctypes.c_int64(0), "shape[0]": ctypes.c_int64(n),
              "strides[0]": ctypes.c_int64(1)}
    return {"%s.%s" % (name, k): v for k, v in fields.items()}


def test_handle_of_an_mlir_kernel_launches_from_c():
    n = int(rng.integers(1000, 50000))
    a = np.float32(rng.standard_normal())
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.to_device(np.full(n, np.nan, dtype=np.float32))
    h = ncl.kernel_handle(axpy, (nt.float32[::1], nt.float32, nt.float32[::1], nt.float32[::1]))
    values = {"a": ctypes.c_float(a), **_memref("out", dout), **_memref("x", dx),
              **_memref("y", dy)}
    ordered = [values[p.name] for p in h.params]
    assert [ctypes.sizeof(v) for v in ordered] == [p.size for p in h.params]
    params = (ctypes.c_void_p * len(ordered))(*[ctypes.addressof(v) for v in ordered])
    cuda.current_context()  # numba-cuda's primary context, current on this thread
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    assert not h.cooperative
    assert lib.cuLaunchKernel(h.handle, (n + 255) // 256, 1, 1, 256, 1, 1, 0, None,
                              params, None) == 0
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)
