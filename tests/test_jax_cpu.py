"""numba_cuda_launch.jax and the FFI accessors without a GPU: handlers called
with call frames built in memory, launches recorded by the recording driver,
and the trace-time errors."""

import ctypes
import re
import sys

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

jax = pytest.importorskip("jax")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import xla_ffi  # noqa: E402
from numba_cuda_launch import jax as ncl_jax  # noqa: E402
from numba_cuda_launch.jax import jax_kernel  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402
from support.ffi_frames import FakeXla, Frame, ScalarAttr  # noqa: E402
from numba.core import types as ncl_types  # noqa: E402

rng = np.random.default_rng()


@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def saxpy_launch(x, y, a):
    return (x.shape[0] + 127) // 128, 128


SAXPY = jax_kernel(saxpy, lambda x, y, a: x, saxpy_launch, scalars={"a": np.float32})
SPEC = jax.ShapeDtypeStruct((1000,), np.float32)


def call(handler, frame):
    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)
    return fn(frame.address)


def test_metadata_query_answered_with_running_api_version():
    handler = SAXPY.handler([SPEC, SPEC], [SPEC])
    xla = FakeXla(version=(0, 7))
    frame = Frame(xla, metadata=True)
    assert call(handler, frame) is None
    assert (frame.metadata.version.major, frame.metadata.version.minor) == (0, 7)
    assert frame.metadata.traits == xla_ffi.COMMAND_BUFFER_COMPATIBLE
    frame = Frame(None, metadata=True)  # no API table: the installed jaxlib's version
    assert call(handler, frame) is None
    assert (frame.metadata.version.major, frame.metadata.version.minor) == xla_ffi.api_version()


def test_handler_launches_from_call_frame():
    handler = SAXPY.handler([SPEC, SPEC], [SPEC])
    h = ncl.kernel_handle(saxpy, SAXPY._argtypes([SPEC, SPEC], [SPEC]))
    a = np.float32(rng.standard_normal())
    xla = FakeXla(stream=0xABCD)
    frame = Frame(xla, args=[(0x1000, (1000,), np.float32), (0x2000, (1000,), np.float32)],
                  rets=[(0x3000, (1000,), np.float32)],
                  attrs={"ncl_grid_x": np.int64(8), "ncl_grid_y": np.int64(1),
                         "ncl_grid_z": np.int64(1), "ncl_block_x": np.int64(128),
                         "ncl_block_y": np.int64(1), "ncl_block_z": np.int64(1),
                         "ncl_sharedmem": np.int64(0), "ncl_s_a": a})
    with RecordingDriver() as rec:
        rec.register(h)
        assert call(handler, frame) is None
    (launch,) = rec.launches
    assert launch.grid == (8, 1, 1) and launch.block == (128, 1, 1)
    assert launch.stream == 0xABCD
    as_int = [int.from_bytes(p, "little") for p in launch.params]
    # x, y, out: data pointers and shapes straight from the XLA buffers
    assert as_int[4] == 0x1000 and as_int[11] == 0x2000 and as_int[18] == 0x3000
    assert as_int[5] == as_int[12] == as_int[19] == 1000
    assert launch.params[-1] == a.tobytes()
    assert xla.errors == []


def test_failed_launch_becomes_xla_error():
    handler = SAXPY.handler([SPEC, SPEC], [SPEC])
    xla = FakeXla()
    frame = Frame(xla, args=[(0x1000, (10,), np.float32)] * 2, rets=[(0x3000, (10,), np.float32)],
                  attrs={"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(128),
                         "ncl_s_a": np.float32(1)})
    with RecordingDriver(launch_status=1):
        err = call(handler, frame)
    assert err == 0xE001
    ((message, code),) = xla.errors
    assert message == ("numba_cuda_launch: CUDA kernel 'saxpy' failed: "
                       "CUDA_ERROR_INVALID_VALUE (1)")
    assert code == 13  # INTERNAL


def test_initialize_stage_preloads():
    handler = SAXPY.handler([SPEC, SPEC], [SPEC])
    frame = Frame(FakeXla(), args=[(0x1000, (10,), np.float32)] * 2,
                  rets=[(0x3000, (10,), np.float32)], stage=xla_ffi.STAGE_INITIALIZE,
                  attrs={"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(128),
                         "ncl_s_a": np.float32(1)})
    with RecordingDriver() as rec:
        assert call(handler, frame) is None
    assert rec.launches == [] and len(rec.functions) == 1


def test_attribute_accessors_on_memory_frame():
    import numba
    from numba.core import types as nt

    @numba.cfunc(nt.int64(nt.voidptr))
    def probe(frame):
        s = ffi_sum = 0
        arr = xla_ffi.attr_array_data(frame, "arr", np.int32)
        for v in arr:
            ffi_sum += v
        s = (xla_ffi.attr_int(frame, "i8") * 1000000 + ffi_sum * 1000
             + xla_ffi.attr_string_len(frame, "name") * 10 + xla_ffi.attr_index(frame, "zz"))
        return s + np.int64(xla_ffi.attr_float(frame, "f") * 0)

    frame = Frame(FakeXla(), attrs={"i8": np.int8(-7), "arr": np.array([1, 2, 3], np.int32),
                                    "name": "hello", "f": 2.5, "zz": np.int32(0)})
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(probe.address)
    # attrs sorted: arr, f, i8, name, zz -> zz has index 4
    assert fn(frame.address) == -7 * 1000000 + 6 * 1000 + 5 * 10 + 4


@cuda.jit
def rows_twice(x, out):  # batch-aware: 1-D, or 2-D with a leading batch
    if x.ndim == 1:
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = 2 * x[i]
    else:
        b, i = cuda.grid(2)
        if b < x.shape[0] and i < x.shape[1]:
            out[b, i] = 2 * x[b, i]


def rows_launch():
    """An @njit launch rule of rows_twice: a block row per batch row."""
    import numba

    @numba.njit
    def launch(shape):
        if len(shape) == 1:
            return (1, (shape[0] + 63) // 64), (1, 64)
        return (shape[0], (shape[1] + 63) // 64), (1, 64)
    return launch


def test_signatures_of_one_layout_share_a_body_and_launch_their_own_overloads():
    # float32, float64, int32 and float16 arrays of one rank: one body, entered with
    # each signature's descriptor (buffer types, item sizes, image), launches
    # each dtype's overload with its item size and byte strides, and refuses
    # the buffers of another signature's dtype
    k = jax_kernel(rows_twice, lambda x: x, rows_launch(), vmap_method="broadcast_all")
    dtypes = [np.float32, np.float64, np.int32, np.float16]
    handlers = [k.handler([jax.ShapeDtypeStruct((100,), d)], [jax.ShapeDtypeStruct((100,), d)])
                for d in dtypes]
    assert len({h.body for h in handlers}) == 1 and len({h.address for h in handlers}) == 4
    rows, n = int(rng.integers(2, 9)), int(rng.integers(65, 300))
    xla = FakeXla()
    with RecordingDriver() as rec:
        for h, d in zip(handlers, dtypes):
            assert call(h, Frame(xla, args=[(0x10, (n,), d)], rets=[(0x20, (n,), d)])) is None
            assert call(h, Frame(xla, args=[(0x10, (rows, n), d)],
                                 rets=[(0x20, (rows, n), d)])) is None
        err = call(handlers[1], Frame(xla, args=[(0x10, (n,), np.float32)],
                                      rets=[(0x20, (n,), np.float32)]))
    assert err and "argument 0" in xla.errors[-1][0] and len(rec.launches) == 8
    entries = [launch.kernel for launch in rec.launches]
    assert len(set(entries)) == 8  # each dtype's overload of each rank
    for i, d in enumerate(dtypes):
        size = np.dtype(d).itemsize
        one, two = (rec.launches[2 * i + r] for r in (0, 1))
        p1 = [int.from_bytes(p, "little") for p in one.params]
        p2 = [int.from_bytes(p, "little") for p in two.params]
        # x, then out: meminfo, parent, nitems, itemsize, data, shape..., strides...
        assert p1 == [0, 0, n, size, 0x10, n, size] + [0, 0, n, size, 0x20, n, size]
        assert p2 == [0, 0, rows * n, size, 0x10, rows, n, n * size, size] + \
            [0, 0, rows * n, size, 0x20, rows, n, n * size, size]
        assert one.grid == (1, (n + 63) // 64, 1) and two.grid == (rows, (n + 63) // 64, 1)


@cuda.jit(["void(float32[::1], float32[::1], float32)", "void(int32[::1], int32[::1], int32)"])
def scale_eager(x, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


def test_overloads_converting_scalars_otherwise_get_bodies_of_their_own():
    # an int32 scalar becomes the float32 overload's float32 and the int32
    # overload's int32: parameters of one size, but not one body
    k = jax_kernel(scale_eager, lambda x, a: x, (1, 32), scalars={"a": np.int32})
    dtypes = (np.float32, np.int32)
    specs = [jax.ShapeDtypeStruct((10,), d) for d in dtypes]
    handlers = [k.handler([s], [s]) for s in specs]
    assert handlers[0].body is not handlers[1].body
    a = np.int32(rng.integers(-10**6, 10**6))
    xla = FakeXla()
    with RecordingDriver() as rec:
        for h, d in zip(handlers, dtypes):
            assert call(h, Frame(xla, args=[(0x10, (10,), d)], rets=[(0x20, (10,), d)],
                                 attrs={"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32),
                                        "ncl_s_a": a})) is None
    assert xla.errors == []
    assert [l.params[-1] for l in rec.launches] == [np.float32(a).tobytes(), a.tobytes()]


@cuda.jit
def add3(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]


def test_signatures_of_other_input_counts_get_bodies_of_their_own():
    # (x, y) -> out and (x) -> (y, out): three 1-D arrays each, not one body
    k = jax_kernel(add3, lambda *xs: xs[0], (1, 32))
    s = jax.ShapeDtypeStruct((10,), np.float32)
    two_in, one_in = k.handler([s, s], [s]), k.handler([s], [s, s])
    assert two_in.body is not one_in.body
    xla = FakeXla()
    buf = (10,), np.float32
    attrs = {"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32)}
    with RecordingDriver() as rec:
        assert call(two_in, Frame(xla, args=[(0x10, *buf), (0x20, *buf)], rets=[(0x30, *buf)],
                                  attrs=attrs)) is None
        assert call(one_in, Frame(xla, args=[(0x10, *buf)], rets=[(0x20, *buf), (0x30, *buf)],
                                  attrs=attrs)) is None
    assert xla.errors == [] and len(rec.launches) == 2


def test_batch_aware_handler_takes_both_ranks():
    k = jax_kernel(rows_twice, lambda x: x, rows_launch(), vmap_method="broadcast_all")
    spec = jax.ShapeDtypeStruct((100,), np.float32)
    handler = k.handler([spec], [spec])
    with RecordingDriver() as rec:
        xla = FakeXla()
        assert call(handler, Frame(xla, args=[(0x10, (100,), np.float32)],
                                   rets=[(0x20, (100,), np.float32)])) is None
        assert call(handler, Frame(xla, args=[(0x10, (7, 100), np.float32)],
                                   rets=[(0x20, (7, 100), np.float32)])) is None
        err = call(handler, Frame(xla, args=[(0x10, (2, 7, 100), np.float32)],
                                  rets=[(0x20, (2, 7, 100), np.float32)]))
    assert [(l.grid, l.block) for l in rec.launches] == [((1, 2, 1), (1, 64, 1)),
                                                         ((7, 2, 1), (1, 64, 1))]
    assert err and xla.errors[-1][0] == (
        "numba_cuda_launch: CUDA kernel 'rows_twice': argument 0 has rank 3; the handler takes "
        "rank 1, or 2 with a leading batch dimension")


def test_batch_aware_needs_runtime_launch_rule():
    with pytest.raises(ValueError, match="@njit function of the input shapes"):
        jax_kernel(rows_twice, lambda x: x, lambda x: (1, 64), vmap_method="expand_dims")


# -- trace-time errors ---------------------------------------------------------

def test_wrong_number_of_arrays():
    fixed = jax_kernel(saxpy, SPEC, ((8,), (128,)), scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy' takes 4 parameters"):
        fixed(np.ones(4, np.float32), a=1.0)
    with pytest.raises(TypeError, match="kernel 'saxpy': the out_shapes= function <lambda> "
                                        "takes 3 parameter.* kernel's 1 input"):
        SAXPY(np.ones(4, np.float32), a=1.0)


def test_out_shapes_function_failing_in_its_body():
    k = jax_kernel(saxpy, lambda x, y, a: x.shape + None, saxpy_launch, scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="kernel 'saxpy': out_shapes rule failed for 2 input"):
        k(x, x, a=1.0)


@pytest.mark.parametrize("which", ["out_shapes", "launch"])
def test_a_python_rule_s_own_exception_propagates_noting_the_kernel(which):
    class Mine(Exception):
        pass

    def fails(*args, **kw):
        raise Mine("the user's words")

    rules = dict(out_shapes=lambda x, y, a: x, launch=saxpy_launch)
    rules[which] = fails
    k = jax_kernel(saxpy, rules["out_shapes"], rules["launch"], scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(Mine, match="the user's words") as info:
        k(x, x, a=1.0)
    if sys.version_info >= (3, 11):
        assert info.value.__notes__ == [
            "raised by the %s= rule of jax_kernel of kernel 'saxpy'" % which]


def test_missing_and_unknown_scalars():
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="scalars \\['a'\\] were declared"):
        SAXPY(x, x)
    with pytest.raises(TypeError, match="scalars"):
        SAXPY(x, x, a=1.0, b=2)


def test_dtype_mismatch_names_parameter():
    @cuda.jit("void(float32[::1], float32[::1], float32[::1], float32)")
    def eager_saxpy(x, y, out, a):
        pass

    k = jax_kernel(eager_saxpy, lambda x, y, a: x, saxpy_launch, scalars={"a": np.float32})
    x64 = np.ones(4, np.float64)
    with pytest.raises(TypeError) as info:
        k(x64, x64, a=1.0)
    assert "parameter 'x'" in str(info.value) and "float64" in str(info.value)


def test_alias_mismatch():
    k = jax_kernel(saxpy, lambda x, y, a: jax.ShapeDtypeStruct((3,), np.float32),
                   saxpy_launch, scalars={"a": np.float32}, input_output_aliases={0: 0})
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="input 0 .* cannot alias output 0"):
        k(x, x, a=1.0)


def test_unsupported_dtype():
    import jax.numpy as jnp

    x = jax.ShapeDtypeStruct((4,), jnp.bfloat16)
    with pytest.raises(TypeError, match="input 0: dtype bfloat16"):
        SAXPY(x, x, a=1.0)


def test_bad_launch_rule():
    k = jax_kernel(saxpy, lambda x, y, a: x, lambda x, y, a: (0, 128), scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="kernel .saxpy.: griddim must be 1..2\\*\\*31-1 in x and "
                                         "1..65535 in y and z, got 0 in x \\(from the launch rule\\)"):
        k(x, x, a=1.0)


def test_bad_launch_values_refused():
    x = np.ones(4, np.float32)
    for rule, what in ((lambda x, y, a: (2.0, 128), "griddim"),
                       (lambda x, y, a: (2, (128.0,)), "blockdim"),
                       (lambda x, y, a: (2, True), "blockdim")):
        k = jax_kernel(saxpy, lambda x, y, a: x, rule, scalars={"a": np.float32})
        with pytest.raises(TypeError, match="kernel 'saxpy': %s must be an integer or a tuple of "
                                            "1 to 3 integers, got .* \\(from the launch rule\\)"
                                            % what):
            k(x, x, a=1.0)
    k = jax_kernel(saxpy, lambda x, y, a: x, lambda x, y, a: 128, scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy': launch rule must give \\(grid, block\\), "
                                        "got int 128"):
        k(x, x, a=1.0)
    with pytest.raises(TypeError, match="kernel 'saxpy': griddim must be an integer"):
        jax_kernel(saxpy, SPEC, ((8.5,), (128,)), scalars={"a": np.float32})


def test_sharedmem_must_be_a_non_negative_integer():
    with pytest.raises(ValueError, match="kernel 'saxpy': sharedmem must be between 0 and "
                                         "2\\*\\*32-1 bytes, got -1"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, sharedmem=-1)
    for bad in (2.5, True, "64"):
        with pytest.raises(TypeError, match="kernel 'saxpy': sharedmem must be an integer number "
                                            "of bytes"):
            jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, sharedmem=bad)
    k = jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, sharedmem=np.int32(256))
    assert k.sharedmem == 256 and type(k.sharedmem) is int


def test_sharedmem_beyond_the_driver_range_refused():
    with pytest.raises(ValueError, match="kernel 'saxpy': sharedmem must be between 0 and "
                                         "2\\*\\*32-1 bytes, got 1099511627776"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, sharedmem=2**40)
    k = jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, sharedmem=2**32 - 1)
    assert k.sharedmem == 4294967295


@pytest.mark.parametrize("shape", [(-1,), (4, -2), (2 ** 62,), (2 ** 31, 2 ** 31)])
def test_out_shapes_beyond_what_xla_can_hold_are_refused(shape):
    # (before: a negative extent was an MLIR "Invalid type" error; 2**62
    # float32 items aborted the process inside XLA)
    k = jax_kernel(saxpy, lambda x, y, a: jax.ShapeDtypeStruct(shape, np.float32), (8, 128),
                   scalars={"a": np.float32})
    x = jax.ShapeDtypeStruct((8,), np.float32)
    with pytest.raises(ValueError) as info:
        k.register(x, x, a=1.0)
    assert str(info.value) == ("kernel 'saxpy': out_shapes gave shape %r for output 0; extents "
                               "are integers >= 0 and an output holds less than 2**63 bytes"
                               % (shape,))


@pytest.mark.parametrize("method", ["nope", 0, "Sequential"])
def test_vmap_method_is_checked_by_jax_kernel(method):
    # (before: accepted, then jax's "must be on of the allowed methods" at the
    # first call, without the kernel's name)
    with pytest.raises(ValueError) as info:
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, vmap_method=method)
    assert str(info.value).startswith(
        "kernel 'saxpy': vmap_method must be one of 'sequential', 'sequential_unrolled', "
        "'expand_dims', 'broadcast_all', 'legacy_vectorized', None, got %s %r"
        % (type(method).__name__, method))


@pytest.mark.parametrize("launch, message", [
    ((2**40, 128), "griddim must be 1..2\\*\\*31-1 in x and 1..65535 in y and z, got "
                   "1099511627776 in x \\(from the launch\\)"),
    ((2**31, 128), "griddim .* got 2147483648 in x"),
    (((1, 65536), 128), "griddim .* got 65536 in y"),
    (((1, 1, 70000), 128), "griddim .* got 70000 in z"),
    ((1, 1025), "blockdim must be 1..1024 in x and y and 1..64 in z, got 1025 in x"),
    ((1, (1, 1, 65)), "blockdim .* got 65 in z"),
    ((1, (32, 64)), "blockdim \\(32, 64\\) has 2048 threads in all; CUDA takes at most 1024 "
                    "per block"),
])
def test_launch_beyond_cuda_limits_refused(launch, message):
    with pytest.raises(ValueError, match="kernel 'saxpy': " + message):
        jax_kernel(saxpy, SPEC, launch, scalars={"a": np.float32})


def test_launch_at_cuda_limits_accepted():
    k = jax_kernel(saxpy, SPEC, ((2**31 - 1, 65535, 65535), (16, 4, 16)),
                   scalars={"a": np.float32})
    assert k._static_dims == ((2**31 - 1, 65535, 65535), (16, 4, 16))


def test_traced_launch_rule_beyond_cuda_limits_refused():
    k = jax_kernel(saxpy, lambda x, y, a: x, lambda x, y, a: (2**40, 128),
                   scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(ValueError, match="kernel 'saxpy': griddim .* got 1099511627776 in x "
                                         "\\(from the launch rule\\)"):
        jax.jit(lambda x: k(x, x, a=1.0)).lower(x)


def test_none_scalar_dtype_refused():
    with pytest.raises(TypeError, match="kernel 'saxpy' scalar 'a': None is not a dtype"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": None})


def test_njit_launch_rule_of_the_wrong_arity():
    import numba

    @numba.njit
    def one_shape(s0):
        return (1, 32)

    k = jax_kernel(saxpy, lambda x, y, a: x, one_shape, scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError) as info:
        k(x, x, a=1.0)
    text = str(info.value)
    assert text.startswith("kernel 'saxpy': the launch= function one_shape takes 1 "
                           "parameter(s) (s0), but it is called with the shapes of the "
                           "kernel's 2 input(s), then its 1 scalar(s) ['a'] positionally")


def test_out_shapes_function_of_the_wrong_arity():
    k = jax_kernel(saxpy, lambda x: x, (1, 32), scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="kernel 'saxpy': the out_shapes= function <lambda> "
                                        "takes 1 parameter\\(s\\) \\(x\\), but it is called "
                                        "with the shape/dtype structs of the kernel's 2 "
                                        "input\\(s\\), then its 1 scalar\\(s\\) \\['a'\\] by "
                                        "keyword"):
        k(x, x, a=1.0)


def test_python_launch_function_of_the_wrong_arity():
    k = jax_kernel(saxpy, lambda x, y, a: x, lambda x, y: (1, 32), scalars={"a": np.float32})
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="kernel 'saxpy': the launch= function <lambda> takes "
                                        "2 parameter\\(s\\) \\(x, y\\), but it is called with "
                                        "the shape/dtype structs of the kernel's 2 input"):
        k(x, x, a=1.0)


def test_cuda_kernel_on_xla_cpu_says_how_to_run_it_there():
    k = jax_kernel(saxpy, lambda x, y, a: x, saxpy_launch, scalars={"a": np.float32})
    x = jax.device_put(np.ones(8, np.float32), jax.devices("cpu")[0])
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda x: k(x, x, a=1.0))(x))
    text = str(info.value)
    assert "jax_kernel of CUDA kernel 'saxpy' was called on XLA:CPU" in text
    assert "run on CUDA GPUs only" in text
    assert "set NUMBA_ENABLE_CUDASIM=1 before numba is imported" in text


def test_stream_error_is_given_back_to_xla():
    import numba
    from numba.core import types as nt

    @numba.cfunc(nt.voidptr(nt.voidptr))
    def probe(frame):
        return xla_ffi.stream(frame)

    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(probe.address)
    gpu, cpu = FakeXla(stream=0xABC), FakeXla(stream=None)
    assert fn(Frame(gpu).address) == 0xABC and gpu.destroyed == []
    assert fn(Frame(cpu).address) is None
    # XLA:CPU's Stream_Get fails: its error is destroyed, once
    assert cpu.destroyed == [(24, cpu.stream_errors[0])] and len(cpu.stream_errors) == 1


def test_constructor_argument_errors():
    with pytest.raises(TypeError, match="kernel 'saxpy': launch must be \\(grid, block\\), a "
                                        "function .* got NoneType None"):
        jax_kernel(saxpy, SPEC, None, scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy': launch must be .* got int 7"):
        jax_kernel(saxpy, SPEC, 7, scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy': scalars must be a dict \\{parameter "
                                        "name: dtype\\}, got list \\['a'\\]"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars=["a"])
    with pytest.raises(TypeError, match="kernel 'saxpy': out_shapes is required"):
        jax_kernel(saxpy, None, (8, 128), scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy' scalar 'a': 'nonsense' is not a dtype"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": "nonsense"})


def test_out_shapes_giving_a_non_shape():
    x = np.ones(4, np.float32)
    k = jax_kernel(saxpy, lambda x, y, a: 3, saxpy_launch, scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy': out_shapes gave int 3 for output 0; "
                                        "expected a jax.ShapeDtypeStruct"):
        k(x, x, a=1.0)
    k = jax_kernel(saxpy, lambda x, y, a: [x, "y"], saxpy_launch, scalars={"a": np.float32})
    with pytest.raises(TypeError, match="out_shapes gave str 'y' for output 1"):
        k(x, x, a=1.0)


def test_positional_scalar_is_not_an_input():
    x = np.ones(4, np.float32)
    with pytest.raises(TypeError, match="kernel 'saxpy' input 2: expected an array .* got float "
                                        "2.0; scalars are passed by keyword \\(a=...\\)"):
        SAXPY(x, x, 2.0)


# -- scalars: bound by the kernel's parameter names ------------------------------

@cuda.jit
def axpb(x, out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + b


def fixed_frame(xla, n, **scalars):
    attrs = {"ncl_grid_x": np.int64(1), "ncl_grid_y": np.int64(1), "ncl_grid_z": np.int64(1),
             "ncl_block_x": np.int64(32), "ncl_block_y": np.int64(1), "ncl_block_z": np.int64(1),
             "ncl_sharedmem": np.int64(0)}
    attrs.update({"ncl_s_" + k: v for k, v in scalars.items()})
    return Frame(xla, args=[(0x1000, (n,), np.float32)], rets=[(0x2000, (n,), np.float32)],
                 attrs=attrs)


def test_scalars_bound_by_parameter_name_not_declaration_order():
    k = jax_kernel(axpb, lambda x, **kw: x, (1, 32), scalars={"b": np.int32, "a": np.float32})
    spec = jax.ShapeDtypeStruct((10,), np.float32)
    assert list(k.scalars) == ["a", "b"]
    assert k._argtypes([spec], [spec])[2:] == (ncl_types.float32, ncl_types.int32)
    handler = k.handler([spec], [spec])
    a, b = np.float32(rng.standard_normal()), np.int32(rng.integers(-1000, 1000))
    xla = FakeXla()
    with RecordingDriver() as rec:
        rec.register(ncl.kernel_handle(axpb, k._argtypes([spec], [spec])))
        # XLA passes the attributes as the call site made them: a float32, b int32
        assert call(handler, fixed_frame(xla, 10, a=a, b=b)) is None
    (launch,) = rec.launches
    assert launch.params[-2:] == [a.tobytes(), b.tobytes()]
    # and the call site names them so: a float32 attribute for a, int32 for b
    text = jax.jit(lambda x: k(x, b=7, a=0.5)).lower(np.ones(10, np.float32)).as_text()
    assert "ncl_s_a = 5.000000e-01 : f32" in text and "ncl_s_b = 7 : i32" in text


def test_scalar_names_must_be_the_trailing_parameters():
    with pytest.raises(TypeError) as info:
        jax_kernel(axpb, SPEC, (1, 32), scalars={"a": np.float32, "c": np.int32})
    assert str(info.value) == ("kernel 'axpb': scalars must be named as the kernel's last 2 "
                               "parameter(s) ['a', 'b'] (in any order); got ['a', 'c']")
    with pytest.raises(TypeError, match="last 1 parameter\\(s\\) \\['b'\\] \\(in any order\\); "
                                        "got \\['a'\\]"):
        jax_kernel(axpb, SPEC, (1, 32), scalars={"a": np.float32})
    # names that are no identifiers are refused the same way (no generated-code error)
    with pytest.raises(TypeError, match="got \\['a b', \"b'\"\\]"):
        jax_kernel(axpb, SPEC, (1, 32), scalars={"a b": np.float32, "b'": np.int32})


@cuda.jit
def only_scalars(a, b):
    pass


def test_kernel_needs_an_array_parameter():
    with pytest.raises(TypeError, match="kernel 'only_scalars' has parameters \\(a, b\\); with 2 "
                                        "scalar\\(s\\) it would have no array parameter"):
        jax_kernel(only_scalars, SPEC, (1, 32), scalars={"a": np.float32, "b": np.int32})


def attrs_of(k, **scalars):
    """The scalar attributes a call site makes (from the lowered module)."""
    text = jax.jit(lambda x: k(x, **scalars)).lower(np.ones(10, np.float32)).as_text()
    return {m.group(1): (m.group(2), m.group(3))  # (value, type; None for bools)
            for m in re.finditer(r"ncl_s_(\w+) = ([^ ,}]+)(?: : (\w+))?", text)}


@cuda.jit
def typed_scalars(x, out, i8, u8, f32, f16, flag):
    pass


TYPED = jax_kernel(typed_scalars, lambda x, **kw: x, (1, 32),
                   scalars={"i8": np.int8, "u8": np.uint8, "f32": np.float32, "f16": np.float16,
                            "flag": np.bool_})
OK = dict(i8=-5, u8=200, f32=1.5, f16=0.1, flag=False)


@pytest.mark.parametrize("name, value, error, message", [
    ("i8", 2.7, TypeError, "kernel 'typed_scalars' scalar 'i8' \\(int8\\): got float 2.7; "
                           "float -> integer conversion is refused"),
    ("i8", np.float64(3.0), TypeError, "scalar 'i8' \\(int8\\): got float 3.0; float -> integer"),
    ("i8", 300, ValueError, "scalar 'i8' \\(int8\\): 300 is out of range \\[-128, 127\\]"),
    ("u8", -1, ValueError, "scalar 'u8' \\(uint8\\): -1 is out of range \\[0, 255\\]"),
    ("i8", 2 ** 80, ValueError, "out of range \\[-128, 127\\]"),
    ("f32", 1 + 2j, TypeError, "scalar 'f32' \\(float32\\): got complex \\(1\\+2j\\); "
                               "complex -> real conversion is refused"),
    ("f32", 1e39, ValueError, "scalar 'f32' \\(float32\\): 1e\\+39 is out of range"),
    ("f16", 70000.0, ValueError, "scalar 'f16' \\(float16\\): 70000.0 is out of range "
                                 "\\(largest finite float16 is 65504.0\\)"),
    ("flag", 1, TypeError, "scalar 'flag' \\(bool\\): expected True or False, got int 1"),
    ("f32", "1.5", TypeError, "scalar 'f32' \\(float32\\): expected a number, got str '1.5'"),
    ("f32", np.ones(2, np.float32), TypeError, "expected a number, got ndarray"),
])
def test_lossy_scalar_conversions_refused(name, value, error, message):
    with pytest.raises(error, match=message):
        TYPED(np.ones(10, np.float32), **dict(OK, **{name: value}))


def test_exact_scalar_conversions_accepted():
    got = attrs_of(TYPED, **dict(OK, i8=True, u8=np.uint64(255), f32=3, flag=np.bool_(True)))
    assert got["i8"] == ("1", "i8") and got["u8"] == ("255", "ui8")
    assert got["f32"] == ("3.000000e+00", "f32") and got["flag"] == ("true", None)
    # 0-d arrays count as their element; inf and nan stay what they are
    got = attrs_of(TYPED, **dict(OK, i8=np.array(-7, np.int64), f32=np.float64("inf")))
    assert got["i8"] == ("-7", "i8") and got["f32"] == ("0x7F800000", "f32")


def test_traced_scalar_refused():
    with pytest.raises(TypeError, match="scalar 'f32' \\(float32\\): got a traced value; scalars "
                                        "are static XLA attributes"):
        jax.jit(lambda x, s: TYPED(x, **dict(OK, f32=s)))(np.ones(10, np.float32), 1.0)


# -- float16 scalars ---------------------------------------------------------------

@cuda.jit
def scale_half(x, out, h):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * h


def test_float16_scalar_reaches_the_kernel_as_its_bits():
    k = jax_kernel(scale_half, lambda x, h: x, (1, 32), scalars={"h": np.float16})
    spec = jax.ShapeDtypeStruct((10,), np.float16)
    h = np.float16(rng.standard_normal() * 100)
    # XLA carries no F16 attribute: the call site passes the exact float32
    text = jax.jit(lambda x: k(x, h=h)).lower(np.ones(10, np.float16)).as_text()
    assert "ncl_s_h = " in text and ": f32" in text.split("ncl_s_h = ")[1].split(",")[0]
    handler = k.handler([spec], [spec])
    xla = FakeXla()
    values = [h, np.float16(-0.0), np.float16(6e-8), np.float16(65504), np.float16("inf")]
    with RecordingDriver() as rec:
        rec.register(ncl.kernel_handle(scale_half, k._argtypes([spec], [spec])))
        for v in values:
            frame = Frame(xla, args=[(0x10, (10,), np.float16)], rets=[(0x20, (10,), np.float16)],
                          attrs={"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32),
                                 "ncl_s_h": np.float32(v)})
            assert call(handler, frame) is None
    assert [l.params[-1] for l in rec.launches] == [v.tobytes() for v in values]


def test_bfloat16_scalar_refused():
    import jax.numpy as jnp

    with pytest.raises(TypeError, match="kernel 'scale_half' scalar 'h': bfloat16 scalars "
                                        "cannot be passed"):
        jax_kernel(scale_half, lambda x, h: x, (1, 32), scalars={"h": jnp.bfloat16})


# -- xla_ffi scalar readers: every width read at its width ---------------------------

def _reader(kind):
    import numba
    from numba.core import types as nt

    if kind == "float":
        @numba.cfunc(nt.float64(nt.voidptr))
        def probe(frame):
            return xla_ffi.attr_float(frame, "v", -1.25)
        return ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p)(probe.address)

    @numba.cfunc(nt.int64(nt.voidptr))
    def probe(frame):
        return xla_ffi.attr_int(frame, "v", -7)
    return ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(probe.address)


READ_FLOAT, READ_INT = _reader("float"), _reader("int")


def read(reader, value):
    frame = Frame(FakeXla(), attrs={"v": value})
    return reader(frame.address)


def test_f16_and_bf16_attributes_read_exactly():
    halves = np.concatenate([rng.standard_normal(20) * 1000, [6e-8, -3e-6, 65504, 0.0]])
    for v in halves.astype(np.float16):
        assert read(READ_FLOAT, ScalarAttr(10, v.tobytes())) == float(v)
    assert np.isinf(read(READ_FLOAT, ScalarAttr(10, np.float16("-inf").tobytes())))
    assert np.isnan(read(READ_FLOAT, ScalarAttr(10, np.float16("nan").tobytes())))
    for v in (rng.standard_normal(20) * 1e30).astype(np.float32):
        bits = (v.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16: top half of a float32
        expect = float((bits.astype(np.uint32) << 16).view(np.float32))
        assert read(READ_FLOAT, ScalarAttr(16, bits.tobytes())) == expect
    assert read(READ_INT, ScalarAttr(10, np.float16(-3.75).tobytes())) == -3


def test_every_half_bit_pattern_converts():
    import numba

    @numba.njit
    def convert_all(out):
        for b in range(65536):
            out[b] = xla_ffi.half_bits_to_float(b)

    out = np.empty(65536)
    convert_all(out)
    expect = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float64)
    np.testing.assert_array_equal(out, expect)  # NaNs in the same places, all else exact
    assert np.array_equal(np.signbit(out), np.signbit(expect))


def test_narrow_integer_attributes_read_at_their_width():
    # the bytes after the value are filler: a reader that reads past it is wrong
    for code, value in ((2, np.int8(-100)), (3, np.int16(-30000)), (7, np.uint16(65000)),
                        (6, np.uint8(250)), (1, np.bool_(True)), (4, np.int32(-2 ** 31)),
                        (8, np.uint32(2 ** 32 - 2))):
        assert read(READ_INT, ScalarAttr(code, value.tobytes())) == int(value), code
        assert read(READ_FLOAT, ScalarAttr(code, value.tobytes())) == float(value), code


def test_unreadable_scalar_attribute_counts_as_absent():
    for code in (15, 0, 99):  # C64, invalid, unknown
        assert read(READ_INT, ScalarAttr(code, b"\x01" * 8)) == -7
        assert read(READ_FLOAT, ScalarAttr(code, b"\x01" * 8)) == -1.25


def test_dtype_errors_are_clear():
    import numba
    from numba.core import types as nt
    from numba.core.errors import TypingError

    with pytest.raises(TypeError, match="XLA FFI: no kernel-compatible XLA data type for dtype "
                                        "<U4; supported: bool, int8"):
        xla_ffi.dtype_code(np.dtype("U4"))
    with pytest.raises(TypeError, match="for dtype bfloat16"):
        xla_ffi.dtype_code(jax.numpy.bfloat16)
    with pytest.raises(TypeError, match="for dtype 'not a dtype'"):
        xla_ffi.dtype_code("not a dtype")
    with pytest.raises(TypingError, match="attr_array_data: dtype must be one of int8, int16, "
                                          "int32, int64, uint8, uint16, uint32, uint64, "
                                          "float32, float64 .* got class\\(float16\\)"):
        @numba.cfunc(nt.int64(nt.voidptr))
        def probe(frame):
            return xla_ffi.attr_array_data(frame, "w", np.float16).size
    with pytest.raises(TypingError, match="buffer_as_array: dtype must be one of .* got "):
        @numba.cfunc(nt.int64(nt.voidptr))
        def probe2(frame):
            return xla_ffi.buffer_as_array(xla_ffi.arg_buffer(frame, 0), 1, "x").size


# -- jax.export: target names stable across processes, round trip on XLA:CPU --------
# (the exporting and the calling processes run the kernel in numba-cuda's CUDA
# simulator, whose handlers are XLA:CPU's)

EXPORT_CHILD = """
import json, sys
import numba_cuda_launch.interop.jax as J
import jax
import support.jax_export_kernels as m
names = m.AXPB.target_names  # registered at import (signatures=)
exported = J.export(jax.jit(m.f), platforms=["cpu"])(m.X)
open(sys.argv[1], "wb").write(exported.serialize())
print(json.dumps({"at_import": names, "after_export": m.AXPB.target_names}))
"""

CALL_CHILD = """
import json, sys
import numpy as np
import numba_cuda_launch.interop.jax as J
import jax
import support.jax_export_kernels as m
names = m.AXPB.target_names

def no_retrace(*args, **kwargs):
    raise AssertionError("the kernel was traced again")

m.AXPB._prepare = no_retrace
exported = J.deserialize(open(sys.argv[1], "rb").read())
x = np.random.default_rng().standard_normal(m.N).astype(np.float32)
out = np.asarray(jax.block_until_ready(exported.call(x)))
print(json.dumps({"names": names, "shape": list(out.shape),
                  "max_error": float(np.max(np.abs(out - m.reference(x))))}))
"""

MISSING_CHILD = """
import sys
import numba_cuda_launch.interop.jax as J
import jax
data = open(sys.argv[1], "rb").read()
try:
    J.deserialize(data)
except RuntimeError as exc:
    print("DESERIALIZE:", exc)
import numpy as np
try:
    jax.export.deserialize(data).call(np.ones(%d, np.float32))
except Exception as exc:
    print("XLA:", exc)
"""


def _child(code, *args):
    import json
    import os
    import subprocess
    import sys

    from support.childenv import PREAMBLE, child_env

    here = os.path.dirname(os.path.abspath(__file__))
    env = child_env(NUMBA_ENABLE_CUDASIM="1", JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = here + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, "-c", PREAMBLE + code, *args], env=env,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-4000:]
    last = out.stdout.strip().splitlines()[-1]
    return json.loads(last) if last.startswith("{") else out.stdout


@pytest.fixture(scope="module")
def exported_blob(tmp_path_factory):
    """(path of the serialized export, what the exporting process said)."""
    blob = str(tmp_path_factory.mktemp("export") / "f.jax")
    return blob, _child(EXPORT_CHILD, blob)


@pytest.mark.slow
def test_export_round_trip_in_fresh_processes(exported_blob):
    import support.jax_export_kernels as m

    blob, exported = exported_blob
    called = _child(CALL_CHILD, blob)
    # the same name in both processes, made from what defines the kernel, not a counter
    assert exported["at_import"] == exported["after_export"] == called["names"]
    (name,) = called["names"]
    assert name.startswith("ncl.support.jax_export_kernels.axpb.float32r1.float32r1.float32_int32.")
    # ... and the same for the kernel compiled for a GPU (this process)
    assert name == m.AXPB.register(jax.ShapeDtypeStruct((7,), np.float32), a=0.0, b=0)
    # the deserialized function ran the registered handler, with the scalars as
    # exported (a = 2.5 as float32, b = -3 as int32) over the whole grid
    assert called["shape"] == [m.N]
    assert called["max_error"] < 1e-5


@pytest.mark.slow
def test_export_without_the_kernel_registered_is_a_clear_error(exported_blob):
    text = _child(MISSING_CHILD % 3000, exported_blob[0])
    deser = [l for l in text.splitlines() if l.startswith("DESERIALIZE:")]
    assert deser, text
    assert "calls numba-cuda-launch kernels not registered in this process" in deser[0]
    assert ("kernel support.jax_export_kernels.axpb; inputs float32r1 -> outputs float32r1; "
            "scalars float32, int32") in text
    assert "Import the module that defines each kernel" in text
    # what XLA itself says without the check
    assert "No FFI handler registered for ncl.support.jax_export_kernels.axpb." in text


def test_target_names_distinguish_signatures_and_options():
    import support.jax_export_kernels as m

    f32, f64 = (jax.ShapeDtypeStruct((5,), t) for t in (np.float32, np.float64))
    n32 = m.AXPB.register(f32, a=1.0, b=2)
    assert m.AXPB.register(jax.ShapeDtypeStruct((9,), np.float32), a=3.0, b=4) == n32
    n64 = m.AXPB.register(f64, a=1.0, b=2)
    assert n64 != n32 and ".float64r1.float64r1." in n64
    # another wrapper of the same kernel with the same options shares the handler ...
    same = jax_kernel(m.axpb, lambda x, a, b: x, m.launch, scalars={"a": np.float32, "b": np.int32})
    assert same.register(f32, a=1.0, b=2) == n32
    # ... while other options make another target
    other = jax_kernel(m.axpb, lambda x, a, b: x, m.launch, command_buffer=False,
                       scalars={"a": np.float32, "b": np.int32})
    assert other.register(f32, a=1.0, b=2) not in (n32, n64)
    named = jax_kernel(m.axpb, lambda x, a, b: x, m.launch, name="my/kernel",
                       scalars={"a": np.float32, "b": np.int32})
    assert named.register(f32, a=1.0, b=2).startswith("ncl.my_kernel.float32r1.")
    assert {n32, n64} <= set(ncl_jax.registered_targets())
    checks = m.AXPB.disabled_checks()
    assert [c.is_custom_call() for c in checks] == sorted([n32, n64])


def test_same_qualname_different_kernels_get_distinct_targets():
    def make(scale):
        @cuda.jit
        def scaled(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = scale * x[i]
        return jax_kernel(scaled, lambda x: x, (1, 32))

    s = jax.ShapeDtypeStruct((4,), np.float32)
    first, second = make(2.0).register(s), make(3.0).register(s)
    assert first != second and second == first + ".2"
    assert "make._locals_.scaled" in first


def test_signatures_argument_errors():
    with pytest.raises(TypeError, match="kernel 'saxpy': signatures must be a list of input "
                                        "tuples, got ShapeDtypeStruct"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, signatures=SPEC)
    with pytest.raises(TypeError, match="kernel 'saxpy': each signature is a tuple of inputs"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, signatures=[SPEC])
    with pytest.raises(TypeError, match="kernel 'saxpy': scalars \\['a'\\] were declared; got"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, signatures=[(SPEC, SPEC)])
    with pytest.raises(TypeError, match="export\\(\\) takes a jax.jit-ed function"):
        ncl_jax.export(lambda x: x)


@pytest.mark.slow
def test_multiprocess_example_orchestration_on_cpu():
    """examples/jax_multiprocess.py's launcher, jax.distributed set-up, sharded
    computation and checks, on two CPU processes with a jnp stand-in for the
    kernel (tests/test_jax_gpu.py runs it with the kernel on two GPUs)."""
    import os
    import subprocess
    import sys

    from support.childenv import child_env

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([sys.executable, os.path.join(root, "examples", "jax_multiprocess.py"),
                          "--platform", "cpu", "--timeout", "120"],
                         env=child_env(JAX_PLATFORMS="cpu"), capture_output=True, text=True,
                         timeout=180)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "OK: 2 processes (cpu:0, cpu:" in out.stdout
    assert "process 0 of 2" in out.stdout and "process 1 of 2" in out.stdout


def test_another_handler_of_known_types_compiles_only_its_cfunc():
    # Handler pieces compiled as functions of their own, per handler, made
    # building a handler several times slower: with the views and readers
    # of these types compiled, a new handler compiles no Numba function but
    # its @cfunc (which compiles without a dispatcher event).
    from numba.core import event

    spec = jax.ShapeDtypeStruct((64,), np.float16)
    options = dict(scalars={"a": np.float16})
    first = jax_kernel(saxpy, lambda x, y, a: x, saxpy_launch, **options)
    first.register(spec, spec, a=1.0)
    again = jax_kernel(saxpy, lambda x, y, a: x, saxpy_launch, command_buffer=False, **options)
    with event.install_recorder("numba:compile") as rec:
        again.register(spec, spec, a=1.0)
    compiled = [e.data["dispatcher"].py_func.__qualname__ for _, e in rec.buffer if e.is_start]
    assert compiled == []
    assert again.handler([spec, spec], [spec]) is not first.handler([spec, spec], [spec])


# -- call frames that do not match the handler's signature --------------------------
# XLA's own C++ binding checks a frame against a handler's signature before
# calling it; hand-built frames that differ (as another frame producer, a C++
# host registering the handlers of a C library, or a mismatched export could
# make) were read unchecked: a crash (too few buffers, a 0-d buffer) or a
# launch of values of another type. Each is refused with an error naming the
# kernel and what differs, and nothing is launched.

AXPB = "numba_cuda_launch: CUDA kernel 'axpb': "
AXPB_READS = ("it reads ncl_block_x, ncl_block_y, ncl_block_z, ncl_grid_x, ncl_grid_y, "
              "ncl_grid_z, ncl_s_a, ncl_s_b, ncl_sharedmem")


def _axpb_handler():
    k = jax_kernel(axpb, lambda x, **kw: x, (1, 32), scalars={"a": np.float32, "b": np.int32})
    spec = jax.ShapeDtypeStruct((10,), np.float32)
    return k.handler([spec], [spec])


def _refused(handler, frame, xla):
    with RecordingDriver() as rec:
        err = call(handler, frame)
    assert rec.launches == [] and err is not None
    (message, code), = xla.errors
    assert code == 3  # XLA_FFI_Error_Code_INVALID_ARGUMENT
    return message


F32 = (0x1000, (10,), np.float32)
# the sentences of the one validator of configurations (launchconfig.config_problem)
GRIDDIM = "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got "
BLOCKDIM = ("blockdim must be 1..1024 in x and y and 1..64 in z with at most 1024 threads in "
            "all, got ")
FROM_ATTRIBUTES = " (from the attributes ncl_grid_x/y/z and ncl_block_x/y/z)"
CONFIG = {"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32)}
SCALARS = {"ncl_s_a": np.float32(2), "ncl_s_b": np.int32(3)}


@pytest.mark.parametrize("args, rets, said", [
    ([F32], [F32, F32], "the call has 1 argument(s) and 2 result(s); the handler takes 1 and 1"),
    ([F32, F32], [F32], "the call has 2 argument(s) and 1 result(s); the handler takes 1 and 1"),
    ([], [], "the call has 0 argument(s) and 0 result(s); the handler takes 1 and 1"),
    ([(0x1000, (10,), np.bool_)], [F32],
     "argument 0 is bool of rank 1; the handler takes float32 of rank 1"),
    ([(0x1000, (10,), np.int64)], [F32],
     "argument 0 is int64 of rank 1; the handler takes float32 of rank 1"),
    ([(0x1000, (), np.float32)], [F32],
     "argument 0 is float32 of rank 0; the handler takes float32 of rank 1"),
    ([F32], [(0x2000, (), np.float32)],
     "result 0 is float32 of rank 0; the handler takes float32 of rank 1"),
    ([F32], [(0x2000, (2, 5), np.float32)],
     "result 0 is float32 of rank 2; the handler takes float32 of rank 1"),
], ids=["two results", "two arguments", "none", "bool input", "int64 input", "0-d input",
        "0-d output", "2-d output"])
def test_buffers_that_differ_from_the_signature_are_refused(args, rets, said):
    xla = FakeXla()
    frame = Frame(xla, args=args, rets=rets, attrs=dict(CONFIG, **SCALARS))
    assert _refused(_axpb_handler(), frame, xla) == AXPB + said


def test_an_argument_that_is_no_buffer_is_refused():
    xla = FakeXla()
    frame = Frame(xla, args=[F32], rets=[F32], attrs=dict(CONFIG, **SCALARS))
    frame.frame.args.types[0] = 2  # another XLA_FFI_ArgType
    assert _refused(_axpb_handler(), frame, xla) == AXPB + (
        "argument 0 is not a buffer (its XLA FFI type is 2); the handler takes buffers only")


@pytest.mark.parametrize("attrs, said", [
    ({"ncl_s_a": np.float32(2)},
     "the call has no attribute 'ncl_s_b'; the handler reads it as a scalar of int32"),
    ({"ncl_s_a": np.int32(3), "ncl_s_b": np.float32(2)},  # the scalars' types swapped
     "attribute 'ncl_s_a' is a scalar of int32; the handler reads a scalar of float32"),
    ({"ncl_s_a": np.float64(2), "ncl_s_b": np.int32(3)},
     "attribute 'ncl_s_a' is a scalar of float64; the handler reads a scalar of float32"),
    ({"ncl_s_a": ScalarAttr(10, np.float16(2).tobytes()), "ncl_s_b": np.int32(3)},
     "attribute 'ncl_s_a' is a scalar of float16; the handler reads a scalar of float32"),
    ({"ncl_s_a": "2.0", "ncl_s_b": np.int32(3)},
     "attribute 'ncl_s_a' is a string; the handler reads a scalar of float32"),
    ({"ncl_s_a": np.array([2], np.float32), "ncl_s_b": np.int32(3)},
     "attribute 'ncl_s_a' is an array; the handler reads a scalar of float32"),
    ({"ncl_s_a": ScalarAttr(99, b"\0" * 8), "ncl_s_b": np.int32(3)},
     "attribute 'ncl_s_a' is a scalar of an unknown XLA type; the handler reads a scalar of "
     "float32"),
    (dict(SCALARS, ncl_s_c=np.int32(1)),
     "the call has attribute 'ncl_s_c', which the handler does not read (" + AXPB_READS + ")"),
    (dict(SCALARS, ncl_grid_Y=np.int64(2)),
     "the call has attribute 'ncl_grid_Y', which the handler does not read (" + AXPB_READS + ")"),
], ids=["missing", "swapped", "float64", "float16", "string", "array", "unknown type",
        "unknown name", "misspelt name"])
def test_scalar_attributes_that_differ_are_refused(attrs, said):
    xla = FakeXla()
    frame = Frame(xla, args=[F32], rets=[F32], attrs=dict(CONFIG, **attrs))
    assert _refused(_axpb_handler(), frame, xla) == AXPB + said


@pytest.mark.parametrize("config, said", [
    ({"ncl_block_x": np.int64(32)},
     "the call has no attribute 'ncl_grid_x'; the handler reads it as a scalar of int64"),
    ({"ncl_grid_x": np.int32(1), "ncl_block_x": np.int64(32)},
     "attribute 'ncl_grid_x' is a scalar of int32; the handler reads a scalar of int64"),
    ({"ncl_grid_x": np.int64(0), "ncl_block_x": np.int64(32)},
     GRIDDIM + "(0, 1, 1)" + FROM_ATTRIBUTES),
    ({"ncl_grid_x": np.int64(1), "ncl_grid_z": np.int64(65536), "ncl_block_x": np.int64(32)},
     GRIDDIM + "(1, 1, 65536)" + FROM_ATTRIBUTES),
    ({"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32), "ncl_block_y": np.int64(64)},
     BLOCKDIM + "(32, 64, 1)" + FROM_ATTRIBUTES),
    ({"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32), "ncl_sharedmem": np.int64(-1)},
     "sharedmem must be between 0 and 2**32-1 bytes, got -1 (from the attribute "
     "ncl_sharedmem)"),
], ids=["no grid", "int32 grid", "grid 0", "grid z", "block", "sharedmem"])
def test_launch_attributes_that_differ_are_refused(config, said):
    xla = FakeXla()
    frame = Frame(xla, args=[F32], rets=[F32], attrs=dict(config, **SCALARS))
    assert _refused(_axpb_handler(), frame, xla) == AXPB + said


def test_a_matching_frame_launches_with_the_defaults_of_optional_attributes():
    xla = FakeXla()
    with RecordingDriver() as rec:
        assert call(_axpb_handler(), Frame(xla, args=[F32], rets=[F32],
                                           attrs=dict(CONFIG, **SCALARS))) is None
    (launch,) = rec.launches
    assert (launch.grid, launch.block, launch.sharedmem) == ((1, 1, 1), (32, 1, 1), 0)
    assert launch.params[-2:] == [np.float32(2).tobytes(), np.int32(3).tobytes()]
    assert xla.errors == []


@pytest.mark.parametrize("result, said", [
    ((0, 32), GRIDDIM + "(0, 1, 1) (from the launch rule)"),
    (((1, 1, 70000), 32), GRIDDIM + "(1, 1, 70000) (from the launch rule)"),
    ((1, (16, 16, 65)), BLOCKDIM + "(16, 16, 65) (from the launch rule)"),
    ((1, 1025), BLOCKDIM + "(1025, 1, 1) (from the launch rule)"),
])
def test_a_launch_rule_out_of_cudas_limits_is_refused_naming_it(result, said):
    import numba

    grid, block = result

    @numba.njit
    def rule(x_shape, a, b):
        return grid, block

    k = jax_kernel(axpb, lambda x, **kw: x, rule, scalars={"a": np.float32, "b": np.int32})
    spec = jax.ShapeDtypeStruct((10,), np.float32)
    xla = FakeXla()
    frame = Frame(xla, args=[F32], rets=[F32], attrs=SCALARS)
    assert _refused(k.handler([spec], [spec]), frame, xla) == AXPB + said


def test_a_failed_launch_is_named_without_a_driver_name():
    from numba_cuda_launch.cudadrv import driver

    no_name = driver.prototype("cuGetErrorName")(lambda status, out: 1)
    xla = FakeXla()
    with RecordingDriver(launch_status=719), driver.use_functions(cuGetErrorName=no_name):
        assert call(_axpb_handler(), Frame(xla, args=[F32], rets=[F32],
                                           attrs=dict(CONFIG, **SCALARS))) == 0xE001
    # the package's own name for the status (it was "failed:  (719)")
    assert xla.errors == [("numba_cuda_launch: CUDA kernel 'axpb' failed: "
                           "CUDA_ERROR_LAUNCH_FAILED (719)", 13)]


@pytest.mark.parametrize("grid", [1.5, (1.5, 2), (1, np.float32(2))])
def test_a_launch_rule_returning_a_float_grid_is_refused_saying_so(grid):
    import numba

    @numba.njit
    def rule(x_shape, a, b):
        return grid, 32

    k = jax_kernel(axpb, lambda x, **kw: x, rule, scalars={"a": np.float32, "b": np.int32})
    spec = jax.ShapeDtypeStruct((10,), np.float32)
    with pytest.raises(TypeError) as info:
        k.handler([spec], [spec])
    first = str(info.value).splitlines()[0]
    assert first.startswith("kernel 'axpb': the launch= @njit function rule returns "), first
    assert first.endswith("; it must return (grid, block), each an integer or a tuple of 1 "
                          "to 3 integers"), first
    # it explains the handler's typing error, which quotes the handler's
    # (generated) line the error is at
    handler_error = str(info.value.__context__)
    assert "grid, block = _dim3(grid), _dim3(block)" in handler_error, handler_error


# -- found by a sweep of unusual inputs --------------------------------------------

def _rule_returning(value):
    import numba

    @numba.njit
    def rule(x_shape, y_shape, a):
        return value
    return rule


@pytest.mark.parametrize("value, returned", [
    ((2.0, 128), "float64"), ((1, 2, 3), "3"), (None, "none"), (((1, 1, 1, 1), 32), "x 4"),
    ((2, True), "bool"),
])
def test_njit_launch_rule_returning_no_grid_and_block_names_the_kernel(value, returned):
    # (before: Numba's "Failed in nopython mode pipeline" from the handler's
    # source, or a message naming jax_kernel's launch= but not the kernel)
    k = jax_kernel(saxpy, lambda x, y, a: x, _rule_returning(value), scalars={"a": np.float32})
    with pytest.raises(TypeError) as info:
        k.register(SPEC, SPEC, a=1.0)
    first = str(info.value).splitlines()[0]
    assert first.startswith("kernel 'saxpy': the launch= @njit function rule returns ")
    assert first.endswith("; it must return (grid, block), each an integer or a tuple of 1 "
                          "to 3 integers"), first
    assert returned in first.split(" returns ")[1].split(";")[0], first


def test_njit_launch_rule_that_does_not_compile_names_the_kernel():
    import numba

    @numba.njit
    def rule(x_shape, y_shape, a):
        return x_shape[3], 32  # a 1-tuple has no item 3

    k = jax_kernel(saxpy, lambda x, y, a: x, rule, scalars={"a": np.float32})
    with pytest.raises(TypeError) as info:
        k.register(SPEC, SPEC, a=1.0)
    assert str(info.value).splitlines()[0] == (
        "kernel 'saxpy': the launch= @njit function rule cannot be compiled for the shapes of "
        "its 2 input(s) and its 1 scalar(s) (UniTuple(int64, 1), UniTuple(int64, 1), "
        "float32):")


def test_sharedmem_none_is_refused_naming_the_kernel():
    # (before: int()'s TypeError, naming neither the kernel nor sharedmem)
    with pytest.raises(TypeError, match="^kernel 'saxpy': sharedmem must be an integer number "
                                        "of bytes, got None$"):
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": np.float32}, sharedmem=None)


@pytest.mark.parametrize("shape", [(64.0,), (None,), (True, 4), ("8",)])
def test_out_shapes_extents_that_are_not_integers_are_refused(shape):
    # (before: jax's "Shapes must be 1D sequences of concrete values of
    # integer type" without the kernel's name; True was taken as 1)
    k = jax_kernel(saxpy, lambda x, y, a: jax.ShapeDtypeStruct(shape, np.float32), (8, 128),
                   scalars={"a": np.float32})
    with pytest.raises(TypeError) as info:
        k.register(SPEC, SPEC, a=1.0)
    assert str(info.value) == ("kernel 'saxpy': out_shapes gave shape %r for output 0; extents "
                               "are integers" % (shape,))


@cuda.jit
def add_u64(x, out, k):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + k


def test_uint64_scalar_beyond_int64_is_refused_saying_why():
    # (before: RuntimeError std::bad_cast from jax lowering the attribute)
    k = jax_kernel(add_u64, lambda x, k: x, (1, 32), scalars={"k": np.uint64})
    x = np.ones(8, np.float32)
    for value in (2 ** 63, np.uint64(2 ** 64 - 1)):
        with pytest.raises(ValueError) as info:
            jax.jit(lambda x: k(x, k=value)).lower(x)
        assert str(info.value) == (
            "kernel 'add_u64' scalar 'k' (uint64): %d cannot be passed: jax makes XLA "
            "attributes of integers up to 2**63-1 only; pass it in an input array" % value)
    assert "ui64" in jax.jit(lambda x: k(x, k=2 ** 63 - 1)).lower(x).as_text()


@pytest.mark.parametrize("dtype", [np.longdouble, np.dtype(">i4")])
def test_scalar_dtypes_numba_has_no_type_for_are_refused(dtype):
    # (before: NumbaNotImplementedError 'float128' when the handler compiled)
    with pytest.raises(TypeError) as info:
        jax_kernel(saxpy, SPEC, (8, 128), scalars={"a": dtype})
    assert str(info.value) == (
        "kernel 'saxpy' scalar 'a' must be a boolean, integer or float dtype (bool, int8 to "
        "int64, uint8 to uint64, float16, float32 or float64), got %s" % np.dtype(dtype))
