"""Device arrays and streams of every producer, end to end on a GPU:
numba-cuda, CuPy, PyTorch and JAX, outputs poisoned first, checked against
NumPy on fresh random inputs."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

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
def spin_then_fill(x, value, micros):
    # Sleeps about *micros* microseconds on the GPU before writing, so a
    # consumer that does not wait for this producer reads the old contents
    # (a counting loop would be folded by the compiler).
    i = cuda.grid(1)
    for _ in range(micros):
        cuda.nanosleep(1000)
    if i < x.size:
        x[i] = value


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


class TemporaryExport:
    """A DLPack producer exporting a fresh CuPy copy of *host* at each
    ``__dlpack__``: the capsule is the only owner of that copy."""

    def __init__(self, cp, host):
        self.cp, self.host = cp, host

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, device 0

    def __dlpack__(self, stream=None, max_version=None):
        return self.cp.asarray(self.host).__dlpack__(stream=stream, max_version=max_version)


def test_a_dlpack_capsule_owning_its_memory_lives_until_the_call_returns():
    # Freed at once after reading x, its block would be CuPy's next one of
    # that size: y's copy, and the kernel would read y as x.
    cp = pytest.importorskip("cupy")
    x, y, a = inputs()
    cout = cp.full(x.shape, cp.nan, cp.float32)
    launch_axpy(a, TemporaryExport(cp, x), TemporaryExport(cp, y), cout, 0)
    cp.cuda.runtime.deviceSynchronize()
    np.testing.assert_allclose(cp.asnumpy(cout), a * x + y, rtol=1e-5, atol=1e-6)


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
    spin_then_fill[n // 128, 128, producer](dx, 3.0, 50_000)
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


def _interface_fields(cai):
    """``(fields, dtype, ndim, layout, readonly)`` that a CUDA Array
    Interface dict states, worked out here from the interface's definition:
    the fields unboxing gives (data, itemsize, shape..., strides in bytes...,
    the producer stream: 0 for none, 0 read as the legacy default stream 1)
    and the type's parts."""
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides")
    if strides is None:  # C-contiguous
        strides, step = [], dtype.itemsize
        for n in reversed(shape):
            strides.insert(0, step)
            step *= n
    strides = tuple(int(n) for n in strides)
    stream = cai.get("stream")
    stream = 0 if stream is None else (stream or 1)
    pointer, readonly = cai["data"]
    contiguous = [dtype.itemsize * int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    layout = "C" if list(strides) == contiguous or 0 in shape else \
        "F" if list(strides) == [dtype.itemsize * int(np.prod(shape[:i]))
                                 for i in range(len(shape))] else "A"
    fields = (pointer or 0, dtype.itemsize) + shape + strides + (stream,)
    return fields, dtype, len(shape), layout, bool(readonly)


def _reader_agrees_with_interface(obj):
    """The fields unboxing reads from *obj* by its library's fast reader,
    and the type it is given, are those its ``__cuda_array_interface__``
    states (worked out independently of the package's readers)."""
    from numba.core.typing.typeof import typeof

    from numba_cuda_launch.launch.devicearray import fastpaths, readers, typeof as typing, unbox

    ty = typeof(obj)  # the first one teaches the class its fast path
    want, dtype, ndim, layout, readonly = _interface_fields(obj.__cuda_array_interface__)
    assert (ty.dtype, ty.ndim, ty.layout, ty.readonly) == \
        (numba.from_dtype(dtype), ndim, layout, readonly)
    reader = unbox.READERS.get(type(obj))
    assert reader is not None, type(obj)
    assert reader(obj, ndim) == want
    read = fastpaths.fast_path(type(obj), readers.sync_enabled)
    if read is not None:  # the keyed typing gives the interface's type and fields too
        assert typing._keyed_typeof(read)(obj) == ty
        assert unbox.TYPED_FIELDS.entries[id(obj)][2] == want


def test_cupy_fast_reader_agrees_with_its_interface():
    cp = pytest.importorskip("cupy")
    a = cp.asarray(rng.standard_normal((16, 12)).astype(np.float32))
    views = [a, a[::2, 1::3], a.T, a[:0], cp.zeros(3, cp.float64), a[3]]
    for v in views:
        _reader_agrees_with_interface(v)
    with cp.cuda.Stream(non_blocking=True):  # CuPy names its current stream
        for v in views:
            _reader_agrees_with_interface(v)
    with cp.cuda.Stream.ptds:
        _reader_agrees_with_interface(a)


def test_torch_fast_reader_agrees_with_its_interface():
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(rng.standard_normal((10, 6)).astype(np.float32)).cuda()
    for v in (t, t.t(), t[::3, 1:], t[:0], t[2], torch.zeros(5, dtype=torch.int16, device="cuda")):
        _reader_agrees_with_interface(v)


def test_numba_cuda_reader_agrees_with_its_interface():
    s = cuda.stream()
    d = cuda.to_device(rng.standard_normal((8, 5)).astype(np.float32))
    for v in (d, d[::2], d.bind(s), cuda.device_array(0, np.int32)):
        _reader_agrees_with_interface(v)


def test_cupy_producer_on_its_stream_is_waited_for():
    # CuPy fills x on a non-blocking stream after a long spin and names that
    # stream (its current stream) in the interface: the launch on another
    # non-blocking stream must see the filled values.
    cp = pytest.importorskip("cupy")
    n = 4096
    x = cp.zeros(n, cp.float32)
    y = cp.zeros(n, cp.float32)
    out = cp.full(n, cp.nan, cp.float32)
    producer = cp.cuda.Stream(non_blocking=True)
    consumer = cp.cuda.Stream(non_blocking=True)
    with producer:
        spin_then_fill[n // 128, 128, cuda.external_stream(producer.ptr)](x, 5.0, 50_000)
        launch_axpy(np.float32(1.0), x, y, out, consumer)
    consumer.synchronize()
    np.testing.assert_array_equal(cp.asnumpy(out), np.full(n, 5.0, np.float32))


def test_cupy_launch_on_the_stream_cupy_names_does_not_wait():
    # Inside ``with stream`` CuPy names that stream for its arrays; a launch
    # on it is ordered by the stream: the call returns while the spin
    # before it still runs, and the result still sees the filled values.
    cp = pytest.importorskip("cupy")
    n = 4096
    x, y = cp.zeros(n, cp.float32), cp.zeros(n, cp.float32)
    out = cp.full(n, cp.nan, cp.float32)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        launch_axpy(np.float32(1.0), x, y, out, stream)  # compiled before the spin
        spin_then_fill[n // 128, 128, cuda.external_stream(stream.ptr)](x, 7.0, 50_000)
        launch_axpy(np.float32(1.0), x, y, out, stream)
        busy = not stream.done
    stream.synchronize()
    assert busy  # the call did not wait for the spin
    np.testing.assert_array_equal(cp.asnumpy(out), np.full(n, 7.0, np.float32))


def test_numba_cuda_arrays_after_host_arrays_in_one_launcher():
    # Numba's C dispatch sees numba-cuda arrays as host arrays; the package
    # routes them (tests/test_dispatch_routing_cpu.py has the CPU side).
    @njit
    def maybe_launch(a, x, y, out):
        if out.size > 100:
            launch_axpy(a, x, y, out, 0)
        return out.size

    small = np.zeros(8, np.float32)
    assert maybe_launch(np.float32(1), small, small, small) == 8
    x, y, a = inputs()
    dout = cuda.to_device(np.full_like(x, np.nan))
    assert maybe_launch(a, cuda.to_device(x), cuda.to_device(y), dout) == x.size
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("cupy_stream", [False, True])
def test_cupy_arrays_in_a_graph_recorded_on_a_blocking_stream(cupy_stream):
    # Outside any ``with``, CuPy names the legacy default stream, which may
    # not be used while a blocking stream captures: the recorded launch does
    # not wait for it (the replay, on a blocking stream, is ordered after
    # CuPy's work). Inside ``with s``, CuPy names s: synchronised during
    # the capture.
    cp = pytest.importorskip("cupy")
    import contextlib
    from numba_cuda_launch import graphs

    @njit
    def record_and_replay(a, x, y, out, stream):
        graphs.begin_capture(stream)
        axpy[(out.size + 127) // 128, 128, stream](a, x, y, out)
        graph = graphs.end_capture(stream)
        exe = graph.instantiate()
        exe.launch(stream)
        exe.destroy()
        graph.destroy()

    x, y, a = inputs()
    producer = cp.cuda.Stream(non_blocking=True) if cupy_stream else contextlib.nullcontext()
    with producer:
        cx, cy = cp.asarray(x), cp.asarray(y)
        out = cp.full(x.size, cp.nan, cp.float32)
        stream = cuda.stream()
        record_and_replay(a, cx, cy, out, stream)
    stream.synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), a * x + y, rtol=1e-5, atol=1e-6)
