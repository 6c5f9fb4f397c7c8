"""Device arrays and streams of every producer, end to end on a GPU:
numba-cuda, CuPy, PyTorch and JAX, outputs poisoned first, checked against
NumPy on fresh random inputs."""

import numpy as np
import pytest
from numba import cuda, njit

import numba_cuda_launch as ncl

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


@cuda.jit
def axpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@cuda.jit
def twice2d(x, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 2 * x[i, j]


@cuda.jit
def spin_then_fill(x, value, spins):
    # Busy-waits on the GPU before writing, so a consumer that does not
    # wait for this producer reads the old contents.
    i = cuda.grid(1)
    t = 0
    for _ in range(spins):
        t += 1
    if i < x.size:
        x[i] = value + (t - spins)


@njit
def launch_axpy(a, x, y, out, stream):
    g = max((out.size + 127) // 128, 1)  # a grid of 0 is refused, as by the driver
    axpy[g, 128, stream](a, x, y, out)


@njit
def launch_twice2d(x, out, stream):
    twice2d[((out.shape[0] + 15) // 16, (out.shape[1] + 15) // 16), (16, 16), stream](x, out)


def inputs(n=10_000, dtype=np.float32):
    return (rng.standard_normal(n).astype(dtype), rng.standard_normal(n).astype(dtype),
            np.float32(rng.standard_normal()))


def test_numba_cuda_device_arrays():
    x, y, a = inputs()
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    dout = cuda.to_device(np.full_like(x, np.nan))
    stream = cuda.stream()
    launch_axpy(a, dx, dy, dout, stream)
    stream.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y


def test_numba_cuda_non_contiguous_views_and_zero_size():
    x = rng.standard_normal((64, 48)).astype(np.float32)
    dx = cuda.to_device(x)
    dout = cuda.to_device(np.full((32, 24), np.nan, np.float32))
    launch_twice2d(dx[::2, ::2], dout, 0)
    cuda.synchronize()
    np.testing.assert_array_equal(dout.copy_to_host(), 2 * x[::2, ::2])
    empty = cuda.device_array(0, np.float32)
    launch_axpy(np.float32(1), empty, empty, empty, 0)  # nothing to do, no error
    cuda.synchronize()


def test_mapped_and_managed_arrays():
    x, y, a = inputs(1000)
    mx = cuda.mapped_array(x.shape, np.float32)
    mx[:] = x
    my = cuda.managed_array(y.shape, np.float32)
    my[:] = y
    out = cuda.mapped_array(x.shape, np.float32)
    out[:] = np.nan
    launch_axpy(a, mx, my, out, 0)
    cuda.synchronize()
    np.testing.assert_allclose(np.asarray(out), a * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y


def test_cupy_arrays_and_stream():
    cp = pytest.importorskip("cupy")
    x, y, a = inputs()
    cx, cy = cp.asarray(x), cp.asarray(y)
    cout = cp.full(x.shape, cp.nan, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    launch_axpy(a, cx, cy, cout, stream)
    stream.synchronize()
    np.testing.assert_allclose(cp.asnumpy(cout), a * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y
    # a strided CuPy view
    c2 = cp.asarray(rng.standard_normal((40, 30)).astype(np.float32))
    cout2 = cp.full((20, 15), cp.nan, cp.float32)
    launch_twice2d(c2[::2, ::2], cout2, 0)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_array_equal(cp.asnumpy(cout2), 2 * cp.asnumpy(c2)[::2, ::2])


def test_torch_tensors_and_stream():
    torch = pytest.importorskip("torch")
    x, y, a = inputs()
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    tout = torch.full(x.shape, float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    torch.cuda.synchronize()
    launch_axpy(a, tx, ty, tout, stream)
    stream.synchronize()
    np.testing.assert_allclose(tout.cpu().numpy(), a * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y
    tt = torch.from_numpy(rng.standard_normal((30, 20)).astype(np.float32)).cuda()
    tout2 = torch.full((20, 30), float("nan"), device="cuda")
    launch_twice2d(tt.t(), tout2, 0)  # a transposed (F-ordered) view
    torch.cuda.synchronize()
    np.testing.assert_array_equal(tout2.cpu().numpy(), 2 * tt.t().cpu().numpy())


def test_jax_array_through_dlpack():
    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    x, y, a = inputs()
    jx, jy = jnp.asarray(x), jnp.asarray(y)
    dout = cuda.to_device(np.full_like(x, np.nan))
    stream = cuda.stream()
    launch_axpy(a, ncl.on_stream(jx, stream), ncl.on_stream(jy, stream), dout, stream)
    stream.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y


def test_producer_stream_is_waited_for():
    # The producer fills x on its own stream after a long spin; the CAI v3
    # stream entry makes the consumer (another stream) wait for it.
    n = 4096
    producer = cuda.stream()
    dx = cuda.to_device(np.zeros(n, np.float32), stream=producer)
    dy = cuda.to_device(np.zeros(n, np.float32))
    dout = cuda.to_device(np.full(n, np.nan, np.float32))
    spin_then_fill[n // 128, 128, producer](dx, 3.0, 2_000_000)
    consumer = cuda.stream()
    launch_axpy(np.float32(1.0), dx, dy, dout, consumer)
    consumer.synchronize()
    np.testing.assert_array_equal(dout.copy_to_host(), np.full(n, 3.0, np.float32))


def test_torch_custom_op_under_torch_compile():
    torch = pytest.importorskip("torch")

    @torch.library.custom_op("ncl_test::axpy", mutates_args=())
    def axpy_op(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        out = torch.empty_like(x)
        launch_axpy(np.float32(a), x, y, out, torch.cuda.current_stream())
        return out

    @axpy_op.register_fake
    def _(x, y, a):
        return torch.empty_like(x)

    @torch.compile(fullgraph=True)
    def f(x, y):
        return axpy_op(x, y, 2.0) + 1

    x, y, _ = inputs()
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    out = f(tx, ty)
    np.testing.assert_allclose(out.cpu().numpy(), 2 * x + y + 1, rtol=1e-5, atol=1e-6)  # the GPU fuses a*x+y
