"""Foreign kernels (docs/kernel-sources.md) under numba-cuda's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1): machine code with no Python body to simulate, so
launching one from @njit/@cfunc, asking its occupancy or its
``kernel_handle()`` is a typing error naming the kernel and saying the
simulator runs numba-cuda kernels only (never a real launch on the
simulator's host memory); ``jax_kernel()`` refuses them when made. Started
by tests/test_simulator.py."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.testing import RecordingDriver
from support.foreign_sources import AXPY_SIG, SOURCES, know_live
from support.messages import first_line

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"

REFUSAL = ("kernel 'axpy' cannot be launched here: this process runs numba-cuda's CUDA "
           "simulator (NUMBA_ENABLE_CUDASIM=1), which simulates numba-cuda kernels only, and "
           "this foreign kernel is machine code (%s) with no Python to simulate; run without "
           "NUMBA_ENABLE_CUDASIM to launch it on a GPU")
WHAT = {"cubin": "a cubin image", "PTX": "a PTX image", "fatbin": "a fatbin image",
        "cuda.core ObjectCode": "a cubin image of cuda.core ObjectCode",
        "Triton": "a cubin image of Triton",
        "cuda.core Kernel": "the CUkernel of a cuda.core Kernel",
        "CuPy RawKernel": "the CUfunction of a CuPy RawKernel",
        "CuPy Function": "the CUfunction of a CuPy Function"}


@pytest.fixture(params=sorted(SOURCES))
def refused(request, monkeypatch):
    # The recording driver knows the fake live handles (on a machine with a
    # GPU the real driver would be asked about them, and a fake handle there
    # is a wild pointer) and would see any launch. It refuses to start under
    # the simulator (test below); here no kernel runs, every launch is
    # refused when typed.
    monkeypatch.setattr(driver, "_unused", None)
    rec = RecordingDriver().__enter__()
    try:
        know_live(rec)
        yield SOURCES[request.param].make(), REFUSAL % WHAT[request.param], rec
    finally:
        rec.__exit__(None, None, None)
    assert rec.launches == [] and rec.loads == []


def test_the_recording_driver_refuses_to_start_under_the_simulator():
    before = driver.current_functions()
    rec = RecordingDriver()
    with pytest.raises(RuntimeError) as info:
        with rec:
            raise AssertionError("entered")
    assert str(info.value) == (
        "RecordingDriver cannot record launches in this process: under numba-cuda's CUDA "
        "simulator (NUMBA_ENABLE_CUDASIM=1) kernels run in Python on host memory (the addresses "
        "given are dereferenced): run without NUMBA_ENABLE_CUDASIM to record them")
    assert driver.current_functions() == before  # the driver table was left alone


def test_launch_from_njit_is_a_typing_error_saying_why(refused):
    k, refusal, _ = refused

    @njit
    def go(y, x):
        k[1, 32](y, x, 1.0, 8)

    y = np.zeros(8, np.float32)
    with pytest.raises(TypingError) as info:
        go(y.ctypes.data, y.ctypes.data)
    assert first_line(info.value).startswith(refusal)
    assert (y == 0).all()


def test_cfunc_and_device_array_arguments_are_refused_alike(refused):
    k, refusal, _ = refused

    with pytest.raises(TypingError) as info:
        @numba.cfunc(nt.int32(nt.voidptr, nt.int64))
        def c(p, n):
            return k[1, 32].launch_status(p, p, np.float32(1.0), n)
    assert first_line(info.value).startswith(refusal)

    @njit
    def g(y):
        k[1, 32, 0](y, y, 1.0, 8)

    with pytest.raises(TypingError) as info:
        g(cuda.to_device(np.zeros(8, np.float32)))  # the simulator's device array
    assert first_line(info.value).startswith(refusal)


def test_occupancy_query_and_kernel_handle_are_refused_alike(refused):
    k, refusal, _ = refused

    @njit
    def occ(p):
        return k[1, 128].max_active_blocks(p, p, 1.0, 8)

    with pytest.raises(TypingError) as info:
        occ(0x1000)
    assert first_line(info.value).startswith(refusal)
    with pytest.raises(TypingError) as info:
        ncl.kernel_handle(k, AXPY_SIG)
    assert first_line(info.value).startswith(refusal)


def test_jax_kernel_is_refused_at_construction(refused):
    jax = pytest.importorskip("jax")
    from numba_cuda_launch.jax import jax_kernel

    k, _, _ = refused
    with pytest.raises(TypeError) as info:
        jax_kernel(k, lambda y, a, n: jax.ShapeDtypeStruct((8,), np.float32), (1, 32),
                   scalars={"a": np.float32, "n": np.int64})
    text = str(info.value)
    assert text.startswith("jax_kernel(): foreign kernel 'axpy' cannot be launched here: this "
                           "process runs numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    assert "this foreign kernel is machine code" in text
