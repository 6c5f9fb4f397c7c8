"""Programmatic dependent launches without a GPU: ``kernel[...].dependent()``
from ``@njit``, ``@cfunc`` and ``launch_status`` sets the launch attribute
and nothing else of the launch (recording driver); the refusals (an
argument, an architecture below 9.0, a ``jax_kernel`` option that is not a
bool); ``jax_kernel(..., dependent=True)``'s handler launches dependent."""

import ctypes

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from numba_cuda_launch.testing import RecordingDriver
from support import HAVE_GPU
from support.kernels import dependent_step as step

rng = np.random.default_rng()


@njit
def view(address, n):
    return numba.carray(ncl.as_voidptr(address), (n,), np.float32)


@njit
def launches(p, q, n, grid, stream, shmem):
    a, b = view(p, n), view(q, n)
    step[grid, 128, stream, shmem].dependent()(a, b)
    step[grid, 128, stream, shmem](b, a)
    cfg = step[grid, 128, stream, shmem]
    dep = cfg.dependent()
    s1 = dep.launch_status(a, b)
    s2 = cfg.launch_status(b, a)  # cfg itself is unchanged
    return s1 | s2


def test_dependent_sets_the_attribute_and_nothing_else(fake_driver):
    n = int(rng.integers(1000, 5000))
    grid = (n + 127) // 128
    stream, shmem = int(rng.integers(1, 2**40)) * 16, int(rng.integers(0, 4096))
    assert launches(0x10000, 0x90000, n, grid, stream, shmem) == 0
    got = [(l.dependent, l.grid, l.block, l.stream, l.sharedmem)
           for l in fake_driver.launches]
    plain = ((grid, 1, 1), (128, 1, 1), stream, shmem)
    assert got == [(True,) + plain, (False,) + plain, (True,) + plain, (False,) + plain]
    # the pointers travel as they would without the attribute
    params = [l.params for l in fake_driver.launches]
    assert params[0] == params[2] and params[1] == params[3] and params[0] != params[1]


def test_dependent_from_a_cfunc(fake_driver):
    @numba.cfunc(numba.types.int32(numba.types.intp, numba.types.intp, numba.types.intp))
    def launcher(p, q, n):
        return step[(n + 127) // 128, 128].dependent().launch_status(view(p, n), view(q, n))

    assert launcher.ctypes(0x1000, 0x2000, 300) == 0
    (launch,) = fake_driver.launches
    assert launch.dependent and launch.grid == (3, 1, 1)


def test_dependent_takes_no_arguments():
    @njit
    def bad(p, q):
        step[1, 32].dependent(1)(view(p, 4), view(q, 4))

    with pytest.raises(numba.core.errors.TypingError) as info:
        bad(0x1000, 0x2000)
    first = str(info.value).splitlines()[0]
    assert first.startswith("kernel 'dependent_step': .dependent() takes no arguments")


@pytest.mark.skipif(HAVE_GPU, reason="a configured compute capability applies only "
                    "without a GPU (with one, images are built for the device)")
def test_dependent_below_compute_capability_9_is_refused_naming_it():
    before = ncl.get_compute_capabilities() or ncl.get_compute_capability()

    @cuda.jit
    def plain(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i]

    @njit
    def go(p, q):
        plain[1, 32].dependent()(view(p, 4), view(q, 4))

    try:
        ncl.set_compute_capability((8, 0))
        with pytest.raises(numba.core.errors.TypingError) as info:
            go(0x1000, 0x2000)
    finally:
        ncl.set_compute_capability(before)
    assert str(info.value).splitlines()[0] == (
        "kernel 'plain': dependent launches (programmatic stream serialization) need "
        "compute capability 9.0 or newer; kernels are built for 8.0 here")


# -- jax_kernel -------------------------------------------------------------------

jax = pytest.importorskip("jax")


def _frame(n):
    from support.ffi_frames import FakeXla, Frame

    xla = FakeXla()
    attrs = {"ncl_grid_x": np.int64(2), "ncl_grid_y": np.int64(1), "ncl_grid_z": np.int64(1),
             "ncl_block_x": np.int64(128), "ncl_block_y": np.int64(1),
             "ncl_block_z": np.int64(1), "ncl_sharedmem": np.int64(0)}
    return xla, Frame(xla, args=[(0x1000, (n,), np.float32)],
                      rets=[(0x2000, (n,), np.float32)], attrs=attrs)


def _call(handler, frame):
    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)
    return fn(frame.address)


@pytest.mark.parametrize("dependent", [True, False])
def test_jax_kernel_dependent_launches_dependent(dependent):
    from numba_cuda_launch.jax import jax_kernel

    k = jax_kernel(step, lambda x: x, (2, 128), dependent=dependent)
    spec = jax.ShapeDtypeStruct((200,), np.float32)
    handler = k.handler([spec], [spec])
    xla, frame = _frame(200)
    with RecordingDriver() as rec:
        assert _call(handler, frame) is None, xla.errors
    assert [(l.dependent, l.grid) for l in rec.launches] == [(dependent, (2, 1, 1))]


def test_jax_kernel_dependent_and_plain_are_different_targets():
    from numba_cuda_launch.jax import jax_kernel

    spec = jax.ShapeDtypeStruct((64,), np.float32)
    names = {jax_kernel(step, lambda x: x, (1, 64), dependent=d).register(spec)
             for d in (False, True)}
    assert len(names) == 2


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_jax_kernel_dependent_must_be_a_bool(value):
    from numba_cuda_launch.jax import jax_kernel

    with pytest.raises(TypeError) as info:
        jax_kernel(step, lambda x: x, (1, 64), dependent=value)
    assert str(info.value).startswith("kernel 'dependent_step': dependent must be True or False, got ")
