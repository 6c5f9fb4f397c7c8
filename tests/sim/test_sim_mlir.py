"""numba-cuda-mlir kernels under numba-cuda's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1): numba-cuda-mlir has no simulator, so launching one
of its kernels from @njit/@cfunc is a typing error saying so (never a real
launch on the simulator's host memory), while a numba-cuda kernel in the
same function still simulates. Started by tests/test_simulator.py."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_mlir import cuda as mcuda  # noqa: E402
from support.messages import first_line  # noqa: E402

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"

REFUSAL = ("kernel 'mlir_scale' cannot be launched here: this process runs numba-cuda's CUDA "
           "simulator (NUMBA_ENABLE_CUDASIM=1), which simulates numba-cuda kernels only, and "
           "numba-cuda-mlir has no simulator")


@mcuda.jit
def mlir_scale(out, x, a):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = a * x[i]


@cuda.jit
def nc_scale(out, x, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


def test_launch_from_njit_is_a_typing_error_saying_why():
    @njit
    def f(o, x, n):
        out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
        xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
        mlir_scale[1, 32](out, xs, np.float32(2))

    a = np.zeros(8, np.float32)
    with pytest.raises(TypingError) as info:
        f(a.ctypes.data, a.ctypes.data, 8)
    assert first_line(info.value).startswith(REFUSAL)
    assert (a == 0).all()


def test_device_array_argument_and_cfunc_are_refused_alike():
    @njit
    def g(out, x):
        mlir_scale[1, 32, 0](out, x, np.float32(2))

    a = cuda.to_device(np.zeros(8, np.float32))  # the simulator's device array
    with pytest.raises(TypingError) as info:
        g(a, a)
    assert first_line(info.value).startswith(REFUSAL)

    with pytest.raises(TypingError) as info:
        @numba.cfunc(nt.void(nt.voidptr, nt.int64))
        def c(p, n):
            out = numba.carray(p, (n,), np.float32)
            mlir_scale[1, 32](out, out, np.float32(2))
    assert first_line(info.value).startswith(REFUSAL)


def test_occupancy_query_and_kernel_handle_are_refused_alike():
    @njit
    def occ(o):
        out = numba.carray(ncl.as_voidptr(o), (8,), np.float32)
        return mlir_scale[1, 32].max_active_blocks(out, out, np.float32(2))

    with pytest.raises(TypingError) as info:
        occ(0x1000)
    assert first_line(info.value).startswith(REFUSAL)
    with pytest.raises(TypingError) as info:
        ncl.kernel_handle(mlir_scale, (nt.float32[::1], nt.float32[::1], nt.float32))
    assert first_line(info.value).startswith(REFUSAL)


def test_numba_cuda_kernel_still_simulates():
    @njit
    def f(o, x, n):
        out = numba.carray(ncl.as_voidptr(o), (n,), np.float32)
        xs = numba.carray(ncl.as_voidptr(x), (n,), np.float32)
        nc_scale[1, 32](out, xs, np.float32(2))

    rng = np.random.default_rng()
    x = rng.standard_normal(20).astype(np.float32)
    out = np.full(20, np.nan, np.float32)
    f(out.ctypes.data, x.ctypes.data, 20)
    np.testing.assert_array_equal(out, 2 * x)


def test_jax_kernel_is_refused_at_construction():
    jax = pytest.importorskip("jax")
    from numba_cuda_launch.jax import jax_kernel

    with pytest.raises(TypeError) as info:
        jax_kernel(mlir_scale, lambda x, a: x, (1, 32), scalars={"a": np.float32})
    text = str(info.value)
    assert text.startswith("jax_kernel(): numba-cuda-mlir kernel 'mlir_scale' cannot be "
                           "launched here: this process runs numba-cuda's CUDA simulator "
                           "(NUMBA_ENABLE_CUDASIM=1)")
    assert "numba-cuda-mlir has no simulator" in text
