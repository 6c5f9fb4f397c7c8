"""The XLA FFI call-frame accessors against real XLA on JAX's CPU platform:
a @cfunc handler decodes buffers and attributes and computes on the host."""

import numba
import numpy as np
import pytest
from numba.core import types as nt

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from numba_cuda_launch import xla_ffi as ffi  # noqa: E402

MAJOR, MINOR = ffi.api_version()
rng = np.random.default_rng()
CPU = jax.devices("cpu")[0]  # the handler is registered for XLA:CPU only


@numba.cfunc(nt.voidptr(nt.voidptr))
def affine_handler(frame):
    if ffi.is_metadata_query(frame):
        return ffi.answer_metadata_query(frame, 0, MAJOR, MINOR)
    if ffi.num_args(frame) != 1 or ffi.num_rets(frame) != 2:
        return ffi.error(frame, ffi.c_string("affine: wrong arity"))
    xb = ffi.arg_buffer(frame, 0)
    if ffi.buffer_dtype(xb) != 11 or ffi.buffer_rank(xb) != 2:
        return ffi.error(frame, ffi.c_string("affine: expected a 2-D float32 input"))
    x = ffi.buffer_as_array(xb, 2, np.float32)
    y = ffi.buffer_as_array(ffi.ret_buffer(frame, 0), 2, np.float32)
    info = ffi.buffer_as_array(ffi.ret_buffer(frame, 1), 1, np.int64)
    scale = ffi.attr_float(frame, "scale")
    offset = ffi.attr_int(frame, "offset")
    weights = ffi.attr_array_data(frame, "weights", np.float64)
    if ffi.attr_int(frame, "fail", 0) != 0:
        return ffi.launch_error(frame, 1, "affine (asked to fail)")
    for i in range(x.shape[0]):
        w = weights[i % weights.size] if weights.size else 1.0
        for j in range(x.shape[1]):
            y[i, j] = x[i, j] * scale * w + offset
    info[0] = x.shape[0]
    info[1] = x.shape[1]
    info[2] = ffi.attr_string_len(frame, "tag")
    info[3] = ffi.attr_index(frame, "missing")
    info[4] = ffi.execution_stage(frame)
    return ffi.ok()


jax.ffi.register_ffi_target("ncl_test_affine", jax.ffi.pycapsule(affine_handler.ctypes),
                            platform="cpu", api_version=1)


def call_affine(x, **attrs):
    x = jax.device_put(x, CPU)
    out = (jax.ShapeDtypeStruct(x.shape, jnp.float32), jax.ShapeDtypeStruct((5,), jnp.int64))
    return jax.ffi.ffi_call("ncl_test_affine", out)(x, **attrs)


@pytest.fixture(autouse=True, scope="module")
def x64():
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", False)


def test_buffers_and_attributes_from_real_xla():
    x = jax.device_put(rng.standard_normal((7, 5)).astype(np.float32), CPU)
    scale, offset = np.float32(rng.standard_normal()), int(rng.integers(-9, 9))
    weights = rng.standard_normal(3)
    y, info = jax.jit(lambda x: call_affine(
        x, scale=scale, offset=np.int64(offset), weights=weights, tag="hello"))(x)
    w = weights[np.arange(7) % 3][:, None]
    x = np.asarray(x)
    np.testing.assert_allclose(np.asarray(y), x * np.float64(scale) * w + offset, rtol=1e-6)
    assert list(np.asarray(info)) == [7, 5, 5, -1, ffi.STAGE_EXECUTE]


def test_handler_error_becomes_python_exception():
    x = np.ones((2, 2), np.float32)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(call_affine(x, scale=np.float32(1), offset=np.int64(0),
                                          weights=np.ones(1), tag="t", fail=np.int32(1)))
    assert "affine (asked to fail) failed:" in str(info.value)
    assert "(1)" in str(info.value)


def test_handler_checks_inputs():
    x = jax.device_put(np.ones((4,), np.float32), CPU)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.ffi.ffi_call(
            "ncl_test_affine", (jax.ShapeDtypeStruct(x.shape, jnp.float32),
                                jax.ShapeDtypeStruct((5,), jnp.int64)))(
            x, scale=np.float32(1), offset=np.int64(0), weights=np.ones(1), tag="t"))
    assert "expected a 2-D float32 input" in str(info.value)


def test_api_version_read_from_jaxlib():
    assert MAJOR == 0 and MINOR >= 1


NDIM = "buffer_as_array: ndim must be a constant integer from 0 to 64, got "
DTYPE = "%s: dtype must be one of %s (a NumPy scalar type such as np.float32), got "


@pytest.mark.parametrize("reader, expected", [
    (lambda f: ffi.buffer_as_array(ffi.arg_buffer(f, 0), -1, np.float32).size,
     NDIM + "Literal[int](-1)"),
    (lambda f: ffi.buffer_as_array(ffi.arg_buffer(f, 0), 65, np.float32).size,
     NDIM + "Literal[int](65)"),
    (lambda f: ffi.buffer_as_array(ffi.arg_buffer(f, 0), True, np.float32).size,
     NDIM + "Literal[bool](True)"),
    (lambda f: ffi.buffer_as_array(ffi.arg_buffer(f, 0), ffi.num_args(f), np.float32).size,
     NDIM + "int64"),
    (lambda f: ffi.buffer_as_array(ffi.arg_buffer(f, 0), 1, ffi.attr_float(f, "d")).size,
     DTYPE % ("buffer_as_array", ", ".join(map(str, ffi.DTYPES))) + "float64"),
    (lambda f: ffi.buffer_as_array(ffi.arg_buffer(f, 0), 1, True).size,
     DTYPE % ("buffer_as_array", ", ".join(map(str, ffi.DTYPES))) + "Literal[bool](True)"),
    (lambda f: ffi.attr_array_data(f, "w", ffi.num_args(f)).size,
     DTYPE % ("attr_array_data", "int8, int16, int32, int64, uint8, uint16, uint32, uint64, "
              "float32, float64") + "int64"),
], ids=["negative ndim", "ndim over 64", "bool ndim", "runtime ndim", "runtime dtype",
        "bool dtype", "runtime attr_array_data dtype"])
def test_reader_refuses_a_wrong_constant(reader, expected):
    # the refusal is the first line of the error, not a 0-d view or a failure inside numba
    with pytest.raises(numba.core.errors.TypingError) as info:
        numba.cfunc(nt.int64(nt.voidptr))(reader)
    assert str(info.value).splitlines()[0] == expected


# -- checking the call frame in a hand-written handler ----------------------------

@numba.cfunc(nt.voidptr(nt.voidptr))
def checked_scale(frame):
    if ffi.is_metadata_query(frame):
        return ffi.answer_metadata_query(frame, 0, MAJOR, MINOR)
    err = ffi.check_call(frame, 1, 1, "scale")
    if ffi.is_error(err):
        return err
    err = ffi.check_arg(frame, 0, np.float32, 1, "scale")
    if ffi.is_error(err):
        return err
    err = ffi.check_ret(frame, 0, np.float32, 1, "scale")
    if ffi.is_error(err):
        return err
    err = ffi.check_attr(frame, "factor", np.float32, "scale")
    if ffi.is_error(err):
        return err
    x = ffi.buffer_as_array(ffi.arg_buffer(frame, 0), 1, np.float32)
    y = ffi.buffer_as_array(ffi.ret_buffer(frame, 0), 1, np.float32)
    factor = ffi.attr_float(frame, "factor")
    for i in range(min(x.size, y.size)):
        y[i] = x[i] * factor
    return ffi.ok()


jax.ffi.register_ffi_target("ncl_test_checked_scale", jax.ffi.pycapsule(checked_scale.ctypes),
                            platform="cpu", api_version=1)


def call_checked(x, out_dtype=jnp.float32, **attrs):
    x = jax.device_put(x, CPU)
    return jax.ffi.ffi_call("ncl_test_checked_scale",
                            jax.ShapeDtypeStruct(x.shape, out_dtype))(x, **attrs)


def test_checked_handler_runs_a_matching_call():
    x = rng.standard_normal(9).astype(np.float32)
    factor = np.float32(rng.standard_normal())
    np.testing.assert_allclose(np.asarray(call_checked(x, factor=factor)), x * factor,
                               rtol=1e-6)


@pytest.mark.parametrize("x, out_dtype, attrs, said", [
    (np.ones(4, np.float64), jnp.float32, {"factor": np.float32(2)},
     "scale: argument 0 is float64 of rank 1; the handler takes float32 of rank 1"),
    (np.ones((2, 2), np.float32), jnp.float32, {"factor": np.float32(2)},
     "scale: argument 0 is float32 of rank 2; the handler takes float32 of rank 1"),
    (np.ones(4, np.float32), jnp.int32, {"factor": np.float32(2)},
     "scale: result 0 is int32 of rank 1; the handler takes float32 of rank 1"),
    (np.ones(4, np.float32), jnp.float32, {},
     "scale: the call has no attribute 'factor'; the handler reads it as a scalar of float32"),
    # a value no other call gives: JAX's cache of eager ffi_calls takes 2.0 as
    # float32 and as float64 for the same attribute
    (np.ones(4, np.float32), jnp.float32, {"factor": np.float64(5.5)},
     "scale: attribute 'factor' is a scalar of float64; the handler reads a scalar of float32"),
    (np.ones(4, np.float32), jnp.float32, {"factor": "2"},
     "scale: attribute 'factor' is a string; the handler reads a scalar of float32"),
], ids=["dtype", "rank", "result dtype", "missing attribute", "attribute type",
        "string attribute"])
def test_checked_handler_refuses_what_xla_passes_otherwise(x, out_dtype, attrs, said):
    with pytest.raises(Exception) as info:
        jax.block_until_ready(call_checked(x, out_dtype, **attrs))
    assert said in str(info.value)


def test_check_call_counts_arguments_and_results():
    x = jax.device_put(np.ones(4, np.float32), CPU)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.ffi.ffi_call(
            "ncl_test_checked_scale", jax.ShapeDtypeStruct((4,), jnp.float32))(
            x, x, factor=np.float32(1)))
    assert ("scale: the call has 2 argument(s) and 1 result(s); the handler takes 1 and 1"
            in str(info.value))


@pytest.mark.parametrize("check, expected", [
    (lambda f: ffi.check_arg(f, 0, np.float32, ffi.num_args(f), "h"),
     "check_arg: ndim must be a constant integer from 0 to 64, got int64"),
    (lambda f: ffi.check_ret(f, 0, np.float32, 65, "h"),
     "check_ret: ndim must be a constant integer from 0 to 64, got Literal[int](65)"),
    (lambda f: ffi.check_attr(f, "a", np.complex64, "h"),
     "check_attr: dtype must be one of bool, int8, int16, int32, int64, uint8, uint16, "
     "uint32, uint64, float16, float32, float64 (a NumPy scalar type such as np.float32), "
     "got class(complex64)"),
], ids=["runtime ndim", "ndim over 64", "complex attribute"])
def test_checks_refuse_a_wrong_constant(check, expected):
    with pytest.raises(numba.core.errors.TypingError) as info:
        numba.cfunc(nt.voidptr(nt.voidptr))(check)
    assert str(info.value).splitlines()[0] == expected
