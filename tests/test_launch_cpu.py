"""Launches from compiled code against a recording fake driver (no GPU).

The packed parameters are checked against what numba-cuda's own Python
launch (``_Kernel._prepare_args``) produces for the same values."""

import ctypes
import threading
import types as pytypes

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.cuda.cudadrv import driver as cudadrv
from cuda.bindings import driver as binding

import numba_cuda_launch as ncl
from numba_cuda_launch.testing import RecordingDriver

rng = np.random.default_rng()


@cuda.jit
def add_kernel(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + y[i]


@cuda.jit
def scalars_kernel(out, a, b, c, d, e, f, g, h, i, j, k, l, m):
    out[0] = 1


@cuda.jit
def arrays_kernel(a, b, c, t):
    pass


@cuda.jit(nt.void(nt.CPointer(nt.float32), nt.CPointer(nt.float32)))
def seed_kernel(input, output):
    i = cuda.grid(1)
    output[i] = input[i] + 1


def handle_for(fake, dispatcher, argtypes):
    h = ncl.kernel_handle(dispatcher, argtypes)
    fake.register(h)
    return h


# -- numba-cuda's own packing, as reference --------------------------------

def _fake_devary(host_view, base):
    """What numba-cuda's wrap_arg(...).to_device() returns, for a view laid
    out like *host_view* at device address *base*."""
    layout = pytypes.SimpleNamespace(
        strides_in_bytes=host_view.strides,
        is_contiguous_c=host_view.flags.c_contiguous,
        is_contiguous_f=host_view.flags.f_contiguous,
    )
    return pytypes.SimpleNamespace(
        size=host_view.size, dtype=host_view.dtype, ptr=base,
        shape=host_view.shape, _layout=layout)


def reference_params(dispatcher, argtypes, values, sizes, monkeypatch):
    """Parameter bytes numba-cuda's Python launch would pass."""
    from numba.cuda import dispatcher as cuda_dispatcher

    kernel = dispatcher.overloads[tuple(argtypes)]
    monkeypatch.setattr(
        cuda_dispatcher, "wrap_arg",
        lambda v: pytypes.SimpleNamespace(to_device=lambda retr, stream: v))
    kernelargs = []
    for ty, val in zip(argtypes, values):
        kernel._prepare_args(ty, val, 0, [], kernelargs)
    assert len(kernelargs) == len(sizes)
    out = []
    for arg, size in zip(kernelargs, sizes):
        if isinstance(arg, (bool, np.bool_)):
            out.append(bytes([int(arg)]))
        elif isinstance(arg, (int, np.integer)):
            out.append(int(arg).to_bytes(size, "little", signed=int(arg) < 0))
        else:
            out.append(bytes(arg))
    return out


# -- launch configuration forms --------------------------------------------

@njit
def launch_forms(xp, yp, op, n, stream, g, b, shmem):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    y = numba.carray(ncl.as_voidptr(yp), (n,), np.float32)
    out = numba.carray(ncl.as_voidptr(op), (n,), np.float32)
    add_kernel[g, b](x, y, out)
    add_kernel[(g,), (b,)](x, y, out)
    add_kernel[(g, 2), (b, 1)](x, y, out)
    add_kernel[(g, 2, 3), (b, 2, 1), stream](x, y, out)
    add_kernel[g, b, ncl.as_voidptr(stream)](x, y, out)
    add_kernel[g, b, stream, shmem](x, y, out)
    add_kernel[g, b, 0, 128](x, y, out)


def test_every_configuration_form(fake_driver):
    argtypes = (nt.float32[::1],) * 3
    handle_for(fake_driver, add_kernel, argtypes)
    launch_forms(0x1000, 0x2000, 0x3000, 100, 0xABC, 7, 64, 4096)
    got = [(l.grid, l.block, l.stream, l.sharedmem) for l in fake_driver.launches]
    assert got == [
        ((7, 1, 1), (64, 1, 1), 0, 0),
        ((7, 1, 1), (64, 1, 1), 0, 0),
        ((7, 2, 1), (64, 1, 1), 0, 0),
        ((7, 2, 3), (64, 2, 1), 0xABC, 0),
        ((7, 1, 1), (64, 1, 1), 0xABC, 0),
        ((7, 1, 1), (64, 1, 1), 0xABC, 4096),
        ((7, 1, 1), (64, 1, 1), 0, 128),
    ]
    assert all(l.kernel == add_kernel.overloads[argtypes].entry_name
               for l in fake_driver.launches)


@njit
def launch_with_stream_object(stream, xp, n):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    add_kernel[1, 32, stream](x, x, x)


def test_stream_object_argument(fake_driver):
    handle_for(fake_driver, add_kernel, (nt.float32[::1],) * 3)
    stream = None
    for handle in (binding.CUstream(0x5150), ctypes.c_void_p(0x5150)):
        for args in ((handle,), (None, handle, None)):  # Stream(ctx, handle, fin) before 0.27
            try:
                candidate = cudadrv.Stream(*args)
                if int(candidate) == 0x5150:
                    stream = candidate
                    break
            except (TypeError, AttributeError):
                continue
        if stream is not None:
            break
    assert stream is not None, "cannot make a numba-cuda Stream for this version"
    launch_with_stream_object(stream, 0x1000, 4)
    assert fake_driver.launches[-1].stream == 0x5150


@njit
def configured_in_variable(xp, n, repeats, g, b):
    x = numba.carray(ncl.as_voidptr(xp), (n,), np.float32)
    if n > 10:
        cfg = add_kernel[g, b]
    else:
        cfg = add_kernel[g + 1, b, 0, 16]
    for _ in range(repeats):
        cfg(x, x, x)


def test_configured_kernel_kept_and_reused(fake_driver):
    handle_for(fake_driver, add_kernel, (nt.float32[::1],) * 3)
    configured_in_variable(0x1000, 100, 5, 3, 32)
    configured_in_variable(0x1000, 5, 2, 3, 32)
    cfgs = [(l.grid[0], l.sharedmem) for l in fake_driver.launches]
    assert cfgs == [(3, 0)] * 5 + [(4, 16)] * 2


@njit
def dims_out_of_range(xp, g):
    x = numba.carray(ncl.as_voidptr(xp), (4,), np.float32)
    return add_kernel[g, 32].launch_status(x, x, x)


def test_runtime_dimension_out_of_range_is_not_wrapped(fake_driver):
    handle_for(fake_driver, add_kernel, (nt.float32[::1],) * 3)
    assert dims_out_of_range(0x1000, 2**32 + 1) == 1  # CUDA_ERROR_INVALID_VALUE
    assert dims_out_of_range(0x1000, -3) == 1
    assert dims_out_of_range(0x1000, 0) == 1
    # Refused before the driver: never launched with a wrapped or substituted value.
    assert fake_driver.launches == []
    assert dims_out_of_range(0x1000, 2**32 - 1) == 0
    assert [l.grid[0] for l in fake_driver.launches] == [2**32 - 1]


# -- the README's first example: its cfunc -----------------------------------

def test_seed_cfunc_launches(fake_driver):
    handle_for(fake_driver, seed_kernel, (nt.CPointer(nt.float32),) * 2)

    @numba.cfunc(nt.void(nt.voidptr, nt.CPointer(nt.voidptr), nt.CPointer(nt.char), nt.ulong))
    def kernel_launcher(stream, buffers, opaque, opaque_len):
        n = opaque[0]
        blockspergrid, threadsperblock = (n + 31) // 32, 32
        seed_kernel[blockspergrid, threadsperblock, stream](buffers[0], buffers[1])

    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                          ctypes.c_ulong)(kernel_launcher.address)
    buffers = (ctypes.c_void_p * 2)(0xD000, 0xE000)
    fn(0x77, ctypes.addressof(buffers), bytes([100]), 1)
    (launch,) = fake_driver.launches
    assert launch.grid == (4, 1, 1) and launch.block == (32, 1, 1)
    assert launch.stream == 0x77
    assert launch.params == [(0xD000).to_bytes(8, "little"), (0xE000).to_bytes(8, "little")]


def test_kernel_passed_as_an_njit_argument(fake_driver):
    # the kernel is the argument's type (a value carries nothing)
    handle_for(fake_driver, seed_kernel, (nt.CPointer(nt.float32),) * 2)

    @njit
    def go(k, src, dst):
        k[2, 32](ncl.as_voidptr(src), ncl.as_voidptr(dst))

    go(seed_kernel, 0xD000, 0xE000)
    (launch,) = fake_driver.launches
    assert (launch.grid, launch.block) == ((2, 1, 1), (32, 1, 1))
    assert launch.params == [(0xD000).to_bytes(8, "little"), (0xE000).to_bytes(8, "little")]


# -- parameter packing equals numba-cuda's ----------------------------------

SCALARS = [
    (nt.int8, np.int8(-5)), (nt.int16, np.int16(-300)), (nt.int32, np.int32(-70000)),
    (nt.int64, np.int64(-(2**40))), (nt.uint8, np.uint8(250)), (nt.uint16, np.uint16(65000)),
    (nt.uint32, np.uint32(4000000000)), (nt.uint64, np.uint64(2**63 + 5)),
    (nt.float32, np.float32(-2.25)),
    (nt.float64, np.float64(3.0e100)), (nt.boolean, True),
    (nt.complex64, np.complex64(1.5 - 2.5j)), (nt.complex128, np.complex128(-1e-300 + 7j)),
]


def test_scalar_parameters_match_numba_cuda(fake_driver, monkeypatch):
    argtypes = (nt.float32[::1],) + tuple(t for t, _ in SCALARS)
    h = handle_for(fake_driver, scalars_kernel, argtypes)
    values = [v for _, v in SCALARS]

    @njit
    def go(op, a, b, c, d, e, f, g, h, i, j, k, l, m):
        out = numba.carray(ncl.as_voidptr(op), (1,), np.float32)
        scalars_kernel[1, 1](out, a, b, c, d, e, f, g, h, i, j, k, l, m)

    go(0x4000, *values)
    out_view = np.empty(1, np.float32)
    ref = reference_params(scalars_kernel, argtypes,
                           [_fake_devary(out_view[:], 0x4000)] + values,
                           [p.size for p in h.params], monkeypatch)
    assert fake_driver.launches[-1].params == ref


ARRAY_CASES = ["1d", "2d_c", "2d_f", "3d_c", "slice_a", "transpose"]


def _host_view(host, case):
    """The NumPy view laid out as the njit view of the same *case*."""
    return {
        "1d": lambda: host,
        "2d_c": lambda: host.reshape(10, 12),
        "2d_f": lambda: host.reshape(12, 10).T,
        "3d_c": lambda: host.reshape(4, 5, 6),
        "slice_a": lambda: host.reshape(10, 12)[1:8:2, ::3],
        "transpose": lambda: host.reshape(10, 12).T,
    }[case]()


def _array_launcher(case_id):
    @njit
    def go(p, t0, t1):
        flat = numba.carray(ncl.as_voidptr(p), (120,), np.float64)
        c2 = numba.carray(ncl.as_voidptr(p), (10, 12), np.float64)
        if case_id == 0:
            v = flat
            arrays_kernel[1, 1](v, v, v, (t0, t1))
        elif case_id == 1:
            arrays_kernel[1, 1](c2, c2, c2, (t0, t1))
        elif case_id == 2:
            f2 = numba.farray(ncl.as_voidptr(p), (10, 12), np.float64)
            arrays_kernel[1, 1](f2, f2, f2, (t0, t1))
        elif case_id == 3:
            c3 = numba.carray(ncl.as_voidptr(p), (4, 5, 6), np.float64)
            arrays_kernel[1, 1](c3, c3, c3, (t0, t1))
        elif case_id == 4:
            v = c2[1:8:2, ::3]
            arrays_kernel[1, 1](v, v, v, (t0, t1))
        else:
            v = c2.T
            arrays_kernel[1, 1](v, v, v, (t0, t1))

    return go


@pytest.mark.parametrize("case", ARRAY_CASES)
def test_array_parameters_match_numba_cuda(fake_driver, monkeypatch, case):
    host = np.empty(120, np.float64)
    base = 0x7F0000
    view = _host_view(host, case)
    argty = numba.typeof(view)
    argty = nt.Array(argty.dtype, argty.ndim, argty.layout)
    argtypes = (argty, argty, argty, nt.Tuple((nt.int32, nt.float32)))
    h = handle_for(fake_driver, arrays_kernel, argtypes)
    t0, t1 = np.int32(rng.integers(-100, 100)), np.float32(rng.standard_normal())
    _array_launcher(ARRAY_CASES.index(case))(base, t0, t1)
    launch = fake_driver.launches[-1]
    assert launch.kernel == h.entry_name  # the same overload a Python launch uses
    offset = view.__array_interface__["data"][0] - host.__array_interface__["data"][0]
    dev = _fake_devary(view, base + offset)
    ref = reference_params(arrays_kernel, argtypes, [dev, dev, dev, (t0, t1)],
                           [p.size for p in h.params], monkeypatch)
    assert launch.params == ref
    assert len(h.params) == 3 * (5 + 2 * argty.ndim) + 2


# -- eager kernels: overload choice and conversions --------------------------

@cuda.jit(["void(float32[::1], float32)", "void(float64[::1], float64)"])
def eager_two(x, a):
    pass


@cuda.jit("void(float32[::1], float16, float16)")
def half_kernel(x, a, b):
    pass


def test_float16_parameter_from_cpu_floats(fake_driver, monkeypatch):
    h = handle_for(fake_driver, half_kernel, (nt.float32[::1], nt.float16, nt.float16))

    @njit
    def go(p, a, b):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        half_kernel[1, 1](x, a, b)

    a, b = rng.standard_normal(2)
    go(0x1000, a, np.float32(b))
    params = fake_driver.launches[-1].params
    assert params[-2:] == [np.float16(a).tobytes(), np.float16(np.float32(b)).tobytes()]


def test_float_to_half_bits_matches_numpy():
    from numba_cuda_launch.launch.halffloat import float_to_half_bits

    conv = njit(lambda x: float_to_half_bits(x))
    specials = [0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e6, 6.1e-5, 5.96e-8,
                2.98e-8, 2.99e-8, 1e-9, 1.0 + 2 ** -11, 1.0 + 3 * 2 ** -11, -2.5]
    values = np.concatenate([specials, rng.standard_normal(2000) * 10.0 ** rng.integers(-9, 6, 2000)])
    got = np.array([conv(v) for v in values], np.uint16)
    with np.errstate(over="ignore"):  # values beyond float16's range are meant: they give inf
        want = values.astype(np.float16).view(np.uint16)
    nan = np.isnan(values)
    np.testing.assert_array_equal(got[~nan], want[~nan])
    assert np.isnan(got[nan].view(np.float16)).all()


def test_eager_overload_choice_and_conversion(fake_driver):
    h32 = handle_for(fake_driver, eager_two, (nt.float32[::1], nt.float32))
    h64 = handle_for(fake_driver, eager_two, (nt.float64[::1], nt.float64))

    @njit
    def go(p):
        a32 = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        a64 = numba.carray(ncl.as_voidptr(p), (4,), np.float64)
        eager_two[1, 1](a32, np.float32(2.5))
        eager_two[1, 1](a64, 7)  # int64 -> float64
        eager_two[1, 1](a32, np.int8(3))  # int8 -> float32 (safe)

    go(0x1000)
    names = [l.kernel for l in fake_driver.launches]
    assert names == [h32.entry_name, h64.entry_name, h32.entry_name]
    assert fake_driver.launches[1].params[-1] == np.float64(7).tobytes()
    assert fake_driver.launches[2].params[-1] == np.float32(3).tobytes()


# -- failures ----------------------------------------------------------------

@njit
def launch_raise(p):
    x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
    add_kernel[1, 32](x, x, x)


@njit
def launch_status_form(p):
    x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
    return add_kernel[1, 32].launch_status(x, x, x)


def test_failed_launch_raises_with_driver_error_name():
    with RecordingDriver(launch_status=701):
        with pytest.raises(ncl.CudaLaunchError) as info:
            launch_raise(0x1000)
    err = info.value
    assert err.code == 701 and err.name == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
    assert "add_kernel" in str(err) and "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES" in str(err)


def test_status_form_returns_driver_status():
    with RecordingDriver(launch_status=1):
        assert launch_status_form(0x1000) == 1
    with RecordingDriver() as fake:
        assert launch_status_form(0x1000) == 0
        assert len(fake.launches) == 1


def test_failed_image_load_is_reported_and_retried():
    @cuda.jit
    def fresh_kernel(x):
        pass

    @njit
    def go(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        return fresh_kernel[1, 1].launch_status(x)

    with RecordingDriver(load_status=200) as fake:
        assert go(0x10) == 200
        assert fake.launches == []
        fake.load_status = 0
        assert go(0x10) == 0  # the slot stayed empty, so the next launch loads
        assert len(fake.loads) == 1 and len(fake.launches) == 1


def test_no_driver_reports_clear_error():
    if ncl.driver_problem() is None:
        pytest.skip("a real CUDA driver is bound on this machine")
    with pytest.raises(ncl.CudaLaunchError) as info:
        launch_raise(0x1000)
    assert info.value.name == "CUDA_ERROR_NO_DEVICE"


def test_first_launch_race_publishes_one_handle():
    @cuda.jit
    def racy(x):
        pass

    @njit(nogil=True)
    def go(p, n):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        s = 0
        for _ in range(n):
            s += racy[1, 1].launch_status(x)
        return s

    go.compile((nt.int64, nt.int64))
    with RecordingDriver() as fake:
        barrier = threading.Barrier(8)
        results = []

        def worker():
            barrier.wait()
            results.append(go(0x10, 50))

        threads = [threading.Thread(target=worker) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [0] * 8
    assert len(fake.launches) == 400
    assert len(fake.loads) >= 1
    assert len(fake.unloads) == len(fake.loads) - 1  # losers unloaded theirs
    assert len({l.kernel for l in fake.launches}) == 1


def test_thread_without_context_gets_primary_context():
    @njit
    def go(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        return add_kernel[1, 32].launch_status(x, x, x)

    with RecordingDriver(has_context=False) as fake:
        statuses = [go(0x10), go(0x10)]
    assert statuses == [0, 0]
    assert fake.contexts_made_current == 1  # bound once, then current
    assert len(fake.launches) == 2


def test_preload_loads_without_launching():
    @cuda.jit
    def preloaded(x):
        pass

    @njit
    def go(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        return preloaded[1, 1].preload(x)

    with RecordingDriver() as fake:
        assert go(0x10) == 0
        assert go(0x10) == 0
    assert fake.launches == [] and len(fake.loads) == 1
    assert [name for _, name in fake.functions] == [preloaded.overloads[
        (nt.float32[::1],)].entry_name] * 2


# -- special kernels -----------------------------------------------------------

def test_cooperative_kernel_uses_cooperative_launch(fake_driver):
    @cuda.jit
    def coop(x):
        cuda.cg.this_grid().sync()
        x[0] = 1

    @njit
    def go(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        coop[2, 32](x)

    go(0x10)
    assert fake_driver.launches[-1].cooperative is True
    assert ncl.kernel_handle(coop, (nt.float32[::1],)).cooperative


def test_kernel_handle_layout():
    h = ncl.kernel_handle(
        arrays_kernel, "void(float32[:, :], float32[::1], float32[::1], UniTuple(int32, 2))")
    names = [p.name for p in h.params]
    assert names[:9] == ["a.meminfo", "a.parent", "a.nitems", "a.itemsize", "a.data",
                         "a.shape[0]", "a.shape[1]", "a.strides[0]", "a.strides[1]"]
    assert names[-2:] == ["t[0]", "t[1]"]
    assert len(h.params) == 9 + 7 + 7 + 2
    assert [p.size for p in h.params] == [8] * 23 + [4, 4]
    assert [p.offset for p in h.params] == [8 * i for i in range(23)] + [184, 188]
    # a cubin; or PTX where numba-cuda's linker needs a driver and there is none
    assert h.image[:4] == b"\x7fELF" or (b".entry " + h.entry_name.encode()) in h.image
    assert h.entry_name == arrays_kernel.overloads[h.argtypes].entry_name


def test_kernel_handle_loads_through_driver(fake_driver):
    h = ncl.kernel_handle(seed_kernel, (nt.CPointer(nt.float32),) * 2)
    assert h.handle == h.handle  # loaded once, cached
    assert len(fake_driver.loads) <= 1


# -- the launch plan ----------------------------------------------------------------

def test_overload_selected_once_per_argument_types(fake_driver, monkeypatch):
    """The launch is planned once for a kernel and argument types: the
    typing and lowering of the launches below, and kernel_handle before
    them, reuse that plan instead of choosing again."""
    from numba_cuda_launch.launch import plan

    @cuda.jit
    def chosen_once(out, a):
        out[0] = a

    made = []
    real = plan._make_plan
    monkeypatch.setattr(plan, "_make_plan", lambda source, disp, args, name:
                        made.append(args) or real(source, disp, args, name))
    h = handle_for(fake_driver, chosen_once, (nt.float32[::1], nt.float64))

    @njit
    def go(p, a):
        out = numba.carray(ncl.as_voidptr(p), (1,), np.float32)
        chosen_once[1, 1](out, a)
        return chosen_once[1, 1].launch_status(out, a)

    a = float(rng.standard_normal())
    assert go(0x7F0000002000, a) == 0
    assert made == [(nt.float32[::1], nt.float64)]
    assert [l.kernel for l in fake_driver.launches] == [h.entry_name] * 2
    assert fake_driver.launches[-1].params[-1] == np.float64(a).tobytes()
