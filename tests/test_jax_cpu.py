"""numba_cuda_launch.jax and the FFI accessors without a GPU: handlers called
with call frames built in memory, launches recorded by the recording driver,
and the trace-time errors."""

import ctypes

import numpy as np
import pytest
from numba import cuda

jax = pytest.importorskip("jax")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import xla_ffi  # noqa: E402
from numba_cuda_launch.jax import jax_kernel  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402
from ffi_frames import FakeXla, Frame  # noqa: E402

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
                  attrs={"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(4096),
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
                  attrs={"ncl_s_a": np.float32(1)})
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


def test_batch_aware_handler_takes_both_ranks():
    import numba

    @numba.njit
    def launch(shape):
        if len(shape) == 1:
            return (1, (shape[0] + 63) // 64), (1, 64)
        return (shape[0], (shape[1] + 63) // 64), (1, 64)

    k = jax_kernel(rows_twice, lambda x: x, launch, vmap_method="broadcast_all")
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
    assert err and "unexpected rank" in xla.errors[-1][0]


def test_batch_aware_needs_runtime_launch_rule():
    with pytest.raises(ValueError, match="@njit function of the input shapes"):
        jax_kernel(rows_twice, lambda x: x, lambda x: (1, 64), vmap_method="expand_dims")


# -- trace-time errors ---------------------------------------------------------

def test_wrong_number_of_arrays():
    fixed = jax_kernel(saxpy, SPEC, ((8,), (128,)), scalars={"a": np.float32})
    with pytest.raises(TypeError, match="kernel 'saxpy' takes 4 parameters"):
        fixed(np.ones(4, np.float32), a=1.0)
    with pytest.raises(TypeError, match="kernel 'saxpy': out_shapes rule failed for 1 input"):
        SAXPY(np.ones(4, np.float32), a=1.0)


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
    with pytest.raises(ValueError, match="grid must be positive"):
        k(x, x, a=1.0)
