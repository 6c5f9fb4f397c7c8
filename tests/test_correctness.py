"""The correctness battery: bad and unusual inputs, each refused with a
sentence that names the kernel and the problem, or handled correctly. No
GPU: launches go to the recording driver (a launch refused by the package
never reaches it)."""

import collections
import os
import struct
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit, prange
from numba.core import types as nt
from numba.core.errors import NumbaError, TypingError

import numba_cuda_launch as ncl
from support.childenv import CACHED_LAUNCHER, PREAMBLE, child_env
from support.messages import first_line
from support import HAVE_GPU
from numba_cuda_launch.testing import RecordingDriver

INVALID_VALUE = 1


@cuda.jit
def fill(x, v):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = v


@cuda.jit("void(float32[::1], int32)")
def eager_i32(x, n):
    pass


@cuda.jit("void(float32[::1], int8)")
def eager_i8(x, n):
    pass


@cuda.jit("void(float32[::1], int64)")
def eager_i64(x, n):
    pass


@cuda.jit("void(float32[::1], uint32)")
def eager_u32(x, n):
    pass


@cuda.jit("void(float32[::1], float32)")
def eager_f32(x, v):
    pass


@cuda.jit("void(float32[::1], boolean)")
def eager_bool(x, b):
    pass


@cuda.jit
def with_defaults(x, n=3, f=2.5):
    x[0] = n + f


@cuda.jit
def star_args(*args):
    pass


@cuda.jit(device=True)
def device_fn(x):
    return x


def typing_error(pyfunc, *argtypes):
    with pytest.raises(NumbaError) as info:
        njit(argtypes)(pyfunc)
    return first_line(info.value)


@njit
def view(p, n=4):
    return numba.carray(ncl.as_voidptr(p), (n,), np.float32)


ADDR = 0x10000


# -- 1. launch values out of the driver's range -----------------------------------

@njit
def grid_status(p, g):
    return fill[g, 32].launch_status(view(p), 1.0)


@njit
def block_status(p, b):
    return fill[(2, 2), (b, 1, 1)].launch_status(view(p), 1.0)


@njit
def shmem_status(p, s):
    return fill[1, 32, 0, s].launch_status(view(p), 1.0)


@njit
def grid_raise(p, g):
    fill[g, 32](view(p), 1.0)


@pytest.mark.parametrize("g", [0, -1, -(2 ** 31), 2 ** 32, 2 ** 33, 2 ** 63 - 1])
def test_runtime_griddim_out_of_range_refused_before_the_driver(fake_driver, g):
    assert grid_status(ADDR, g) == INVALID_VALUE
    assert fake_driver.launches == []


def test_runtime_uint64_griddim_above_2_63_refused(fake_driver):
    assert grid_status(ADDR, np.uint64(2 ** 63 + 5)) == INVALID_VALUE
    assert fake_driver.launches == []


@pytest.mark.parametrize("b", [0, -4, 2 ** 32])
def test_runtime_blockdim_out_of_range_refused(fake_driver, b):
    assert block_status(ADDR, b) == INVALID_VALUE
    assert fake_driver.launches == []


@pytest.mark.parametrize("s", [-1, -(2 ** 40), 2 ** 32, 2 ** 40])
def test_runtime_sharedmem_out_of_range_refused_not_zeroed(fake_driver, s):
    assert shmem_status(ADDR, s) == INVALID_VALUE
    assert fake_driver.launches == []


def test_runtime_values_at_the_limits_launch_unchanged(fake_driver):
    fake_driver.shared_per_block_optin = 2 ** 32 - 1  # a device taking every size
    assert grid_status(ADDR, 2 ** 32 - 1) == 0
    assert shmem_status(ADDR, 2 ** 32 - 1) == 0
    assert shmem_status(ADDR, 0) == 0
    launched = [(l.grid[0], l.sharedmem) for l in fake_driver.launches]
    assert launched == [(2 ** 32 - 1, 0), (1, 2 ** 32 - 1), (1, 0)]


def test_raising_form_names_the_configuration_item(fake_driver):
    with pytest.raises(ncl.CudaLaunchError) as info:
        grid_raise(ADDR, -2)
    err = info.value
    assert err.code == INVALID_VALUE and err.name == "CUDA_ERROR_INVALID_VALUE"
    assert "kernel 'fill'" in str(err) and "griddim" in err.detail
    assert fake_driver.launches == []


@njit
def stream_status(p, s):
    return fill[1, 32, s].launch_status(view(p), 1.0)


@pytest.mark.parametrize("s", [-1, -5, -(2 ** 63), np.int32(-1), np.int8(-2)])
def test_runtime_negative_stream_refused_not_sign_extended(fake_driver, s):
    assert stream_status(ADDR, s) == INVALID_VALUE
    assert fake_driver.launches == []


def test_runtime_streams_in_range_launch_unchanged(fake_driver):
    for s in (0, 0x1234, np.uint64(2 ** 64 - 1), np.uint8(200), np.int32(2 ** 31 - 1)):
        assert stream_status(ADDR, s) == 0
    assert [l.stream for l in fake_driver.launches] == [0, 0x1234, 2 ** 64 - 1, 200, 2 ** 31 - 1]


@pytest.mark.parametrize("config, what", [
    # CUDA's limits on every device since compute capability 3.0
    ("fill[2**33, 32]", "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got 8589934592 "
                        "in x"),
    ("fill[1, 2**33]", "blockdim must be 1..1024 in x and y and 1..64 in z, got 8589934592 in x"),
    ("fill[(1, 2**32), 32]", "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got "
                             "4294967296 in y"),
    ("fill[(1, 65536), 32]", "got 65536 in y"),
    ("fill[1, (1, 1, 65)]", "blockdim must be 1..1024 in x and y and 1..64 in z, got 65 in z"),
    ("fill[1, (32, 32, 2)]", "blockdim (32, 32, 2) has 2048 threads in all; CUDA takes at most "
                             "1024 per block"),
    ("fill[0, 32]", "got 0"),
    ("fill[1, 32, 0, 2**33]", "sharedmem must be between 0 and 2**32-1 bytes"),
    ("fill[1, 32, 0, -1]", "sharedmem must be between 0 and 2**32-1 bytes, got -1"),
    ("fill[1, 32, -1]", "the stream must be a CUstream handle (0..2**64-1, 0 for the default "
                        "stream), got -1"),
])
def test_constant_out_of_range_is_a_typing_error(config, what):
    ns = {"fill": fill, "view": view}
    exec("def f(p):\n    %s(view(p), 1.0)\n" % config, ns)
    msg = typing_error(ns["f"], nt.intp)
    assert msg.startswith("kernel 'fill': ") and what in msg


TOO_WIDE = "which no Numba integer holds (they are -2**63..2**64-1)"


@pytest.mark.parametrize("config, what", [
    ("fill[1, 32, 0, 2**64]", "sharedmem must be between 0 and 2**32-1 bytes, got "
                              "18446744073709551616"),
    ("fill[1, 32, 0, -2**64]", "sharedmem must be between 0 and 2**32-1 bytes, got "
                               "-18446744073709551616"),
    ("fill[2**64, 32]", "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got "
                        "18446744073709551616 in x"),
    ("fill[(1, 2**64), 32]", "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got "
                             "18446744073709551616 in y"),
    ("fill[1, (32, 1, 2**64)]", "blockdim must be 1..1024 in x and y and 1..64 in z, got "
                                "18446744073709551616 in z"),
    ("fill[1, 32, 2**64]", "stream is 18446744073709551616, " + TOO_WIDE),
    ("fill[1, 32, 0, 0, 2**64]", "cluster must be 1..2**32-1, got 18446744073709551616 in x"),
    # through a variable, and a configuration kept in one
    ("big = 2**64\n    fill[1, 32, 0, big]", "sharedmem must be between 0 and 2**32-1 bytes, "
                                             "got 18446744073709551616"),
    ("cfg = (1, 32, 0, 2**64)\n    fill[cfg]", "sharedmem must be between 0 and 2**32-1 "
                                              "bytes, got 18446744073709551616"),
])
def test_constant_beyond_64_bits_names_the_configuration_item(config, what):
    # Numba types the constant before any template sees the configuration
    # (before: "Int value is too large: 18446744073709551616", nothing
    # about the kernel or the item)
    ns = {"fill": fill, "view": view}
    exec("def f(p):\n    %s(view(p), 1.0)\n" % config, ns)
    msg = typing_error(ns["f"], nt.intp)
    assert msg == "kernel 'fill': " + what, msg


@pytest.mark.parametrize("call", ["eager_i64[1, 32](view(p), 2**64)",
                                  "eager_i64[1, 32].launch_status(view(p), 2**64)",
                                  "k = eager_i64[1, 32]\n    k(view(p), -2**64)"])
def test_constant_argument_beyond_64_bits_names_the_parameter(call):
    ns = {"eager_i64": eager_i64, "view": view}
    exec("def f(p):\n    %s\n" % call, ns)
    msg = typing_error(ns["f"], nt.intp)
    value = "-18446744073709551616" if "-2**64" in call else "18446744073709551616"
    assert msg == "kernel 'eager_i64' parameter 'n' (argument 2): got the constant %s, %s" \
        % (value, TOO_WIDE), msg


def test_a_constant_beyond_64_bits_elsewhere_keeps_numbas_error():
    # only constants a launch takes are explained
    def f(p):
        big = 2 ** 64
        fill[1, 32](view(p), 1.0)
        return big

    assert typing_error(f, nt.intp).startswith("Failed in nopython mode pipeline")


# -- 2. host memory is never launched as device data ----------------------------

@njit
def launch_array(a):
    return fill[1, 32].launch_status(a, 1.0)


@njit
def launch_array_raising(a):
    fill[1, 32](a, 1.0)


@njit
def launch_nopython_allocated(n):
    return fill[1, 32].launch_status(np.zeros(n, np.float32), 1.0)


GLOBAL_ARRAY = np.zeros(4, np.float32)


@cuda.jit
def reader(x, out):
    out[0] = x[0]


@njit
def launch_global(p):
    return reader[1, 32].launch_status(GLOBAL_ARRAY, view(p))


@njit
def launch_view(p, n):
    return fill[1, 32].launch_status(view(p, n), 1.0)


@njit
def launch_tuple_of_host_array(a, p):
    return tuple_kernel[1, 1].launch_status((view(p), a))


@cuda.jit
def tuple_kernel(t):
    pass


def test_numpy_array_argument_is_refused(fake_driver):
    assert launch_array(np.zeros(8, np.float32)) == INVALID_VALUE
    assert fake_driver.launches == []


def test_numpy_array_refusal_message_names_the_parameter(fake_driver):
    with pytest.raises(ncl.CudaLaunchError) as info:
        launch_array_raising(np.zeros(8, np.float32))
    assert "parameter 'x' (argument 1) is an array in host memory" in str(info.value)


def test_array_allocated_in_nopython_code_is_refused(fake_driver):
    assert launch_nopython_allocated(16) == INVALID_VALUE
    assert fake_driver.launches == []


def test_host_array_inside_a_tuple_is_refused(fake_driver):
    assert launch_tuple_of_host_array(np.zeros(4, np.float32), ADDR) == INVALID_VALUE
    assert fake_driver.launches == []


def test_mapped_or_managed_host_array_is_launched(fake_driver):
    # The driver knows the memory (cuda.mapped_array / managed_array): launchable.
    a = np.zeros(8, np.float32)
    fake_driver.add_device_memory(a.ctypes.data, a.nbytes)
    assert launch_array(a) == 0
    assert len(fake_driver.launches) == 1
    assert fake_driver.pointer_queries == [a.ctypes.data]


def test_empty_host_array_is_not_asked_about(fake_driver):
    assert launch_array(np.zeros(0, np.float32)) == 0
    assert fake_driver.pointer_queries == []


def test_carray_views_cost_no_pointer_query(fake_driver):
    assert launch_view(ADDR, 4) == 0
    assert fake_driver.pointer_queries == []


def test_checked_mode_refuses_global_and_unknown_pointers(fake_driver):
    ncl.check_pointers(True)
    try:
        assert launch_view(ADDR, 4) == INVALID_VALUE
        fake_driver.add_device_memory(ADDR, 16)
        assert launch_view(ADDR, 4) == 0
        assert launch_global(ADDR) == INVALID_VALUE  # the global is host memory
    finally:
        ncl.check_pointers(False)
    assert launch_global(ADDR) == 0  # unchecked: only the pointer could tell
    assert len(fake_driver.launches) == 2


@njit
def seed_like(p, q):
    return eager_ptrs[1, 1].launch_status(ncl.as_voidptr(p), ncl.as_voidptr(q))


@cuda.jit("void(CPointer(float32), CPointer(float32))")
def eager_ptrs(a, b):
    pass


def test_checked_mode_checks_pointer_arguments(fake_driver):
    fake_driver.add_device_memory(ADDR, 64)
    ncl.check_pointers(True)
    try:
        assert seed_like(ADDR, ADDR + 16) == 0
        assert seed_like(ADDR, 0x99999999) == INVALID_VALUE
        assert seed_like(ADDR, 0) == 0  # NULL is passed as NULL
    finally:
        ncl.check_pointers(False)
    assert ncl.pointer_checks_enabled() is False


# -- 3. lossy conversions --------------------------------------------------------

def test_float_to_integer_parameter_is_a_typing_error():
    def f(p, v):
        eager_i32[1, 1](view(p), v)
    msg = typing_error(f, nt.intp, nt.float64)
    assert "kernel 'eager_i32' parameter 'n' (argument 2): got float64, expected int32" in msg
    assert "truncated" in msg


def test_float_constant_to_integer_parameter_is_a_typing_error():
    def f(p):
        eager_i32[1, 1](view(p), 3.7)
    assert "would be truncated" in typing_error(f, nt.intp)


def test_complex_to_real_parameter_is_a_typing_error():
    def f(p, v):
        eager_f32[1, 1](view(p), v)
    msg = typing_error(f, nt.intp, nt.complex128)
    assert "parameter 'v'" in msg and "imaginary part" in msg


def test_float_to_boolean_parameter_is_a_typing_error():
    def f(p, v):
        eager_bool[1, 1](view(p), v)
    assert "parameter 'b'" in typing_error(f, nt.intp, nt.float32)


def test_integer_constant_too_large_for_parameter_is_a_typing_error():
    def f(p):
        eager_i8[1, 1](view(p), 300)
    msg = typing_error(f, nt.intp)
    assert "parameter 'n'" in msg and "the constant 300 does not fit int8" in msg


@pytest.mark.parametrize("method", ["launch_status", "preload"])
def test_integer_constant_too_large_is_a_typing_error_in_the_status_forms_too(method):
    # Numba types bound methods with plain (non-constant) arguments first;
    # the constant must still be checked.
    ns = {"eager_i8": eager_i8, "view": view}
    exec("def f(p):\n    return eager_i8[1, 1].%s(view(p), 300)\n" % method, ns)
    assert typing_error(ns["f"], nt.intp).startswith(
        "kernel 'eager_i8' parameter 'n' (argument 2): got Literal[int](300), expected int8: "
        "the constant 300 does not fit int8")


@njit
def fill_on(p, stream):
    fill[1, 32, stream](view(p), 1.0)


@njit
def address_of(a):
    return ncl.as_voidptr(a)


def test_narrow_integers_become_streams_and_addresses_by_their_signedness(fake_driver):
    # A negative signed stream is no handle: refused, never sign- or
    # zero-extended into one; an unsigned value is taken as it is.
    for value in (np.int32(-2), np.int8(-2), -2):
        with pytest.raises(ncl.CudaLaunchError, match="stream is a negative integer"):
            fill_on(ADDR, value)
    for value in (np.uint32(0xFFFFFFFE), np.uint8(0xFE), np.int16(0x7FFE)):
        fill_on(ADDR, value)
    assert [x.stream for x in fake_driver.launches] == [0xFFFFFFFE, 0xFE, 0x7FFE]
    assert [address_of(v) for v in (np.int8(-1), -1, np.uint8(255))] == \
        [2 ** 64 - 1, 2 ** 64 - 1, 255]


@njit
def i8_status(p, v):
    return eager_i8[1, 1].launch_status(view(p), v)


@njit
def i64_status(p, v):
    return eager_i64[1, 1].launch_status(view(p), v)


@njit
def u32_status(p, v):
    return eager_u32[1, 1].launch_status(view(p), v)


@njit
def i8_raise(p, v):
    eager_i8[1, 1](view(p), v)


@pytest.mark.parametrize("v", [128, 300, -129, 2 ** 40])
def test_runtime_integer_outside_int8_is_refused(fake_driver, v):
    assert i8_status(ADDR, v) == INVALID_VALUE
    assert fake_driver.launches == []


def test_runtime_integer_inside_int8_is_launched_exactly(fake_driver):
    for v in (-128, -1, 0, 127):
        assert i8_status(ADDR, v) == 0
    got = [struct.unpack("<b", l.params[-1])[0] for l in fake_driver.launches]
    assert got == [-128, -1, 0, 127]


def test_uint64_above_int64_range_is_refused(fake_driver):
    assert i64_status(ADDR, np.uint64(2 ** 63 + 1)) == INVALID_VALUE
    assert i64_status(ADDR, np.uint64(2 ** 63 - 1)) == 0
    assert struct.unpack("<q", fake_driver.launches[0].params[-1])[0] == 2 ** 63 - 1


def test_negative_to_unsigned_is_refused(fake_driver):
    assert u32_status(ADDR, -1) == INVALID_VALUE
    assert u32_status(ADDR, 2 ** 32) == INVALID_VALUE
    assert u32_status(ADDR, 2 ** 32 - 1) == 0
    assert len(fake_driver.launches) == 1


def test_integer_range_refusal_message(fake_driver):
    with pytest.raises(ncl.CudaLaunchError) as info:
        i8_raise(ADDR, 1000)
    assert "parameter 'n' (argument 2) of type int8 was given a int64 value outside " \
           "its range" in str(info.value)


@cuda.jit("void(float32[::1], float32, float16, UniTuple(float32, 2))")
def eager_narrow_floats(x, a, h, t):
    pass


@njit
def narrow_floats_status(p, a, h, t):
    return eager_narrow_floats[1, 1].launch_status(view(p), a, h, t)


@pytest.mark.parametrize("a, h, t1, where", [
    (1e300, 1.0, 1.0, "parameter 'a' (argument 2) of type float32"),
    (-3.5e38, 1.0, 1.0, "parameter 'a' (argument 2) of type float32"),
    (1.0, 65520.0, 1.0, "parameter 'h' (argument 3) of type float16"),
    (1.0, -1e5, 1.0, "parameter 'h' (argument 3) of type float16"),
    (1.0, 1.0, 1e39, "parameter 't' (argument 4)[1] of type float32"),
])
def test_runtime_float_made_infinite_by_a_narrower_parameter_is_refused(fake_driver, a, h, t1,
                                                                        where):
    # (before: launched as infinity, a value silently changed)
    assert narrow_floats_status(ADDR, a, h, (1.0, t1)) == INVALID_VALUE
    assert fake_driver.launches == []
    with pytest.raises(ncl.CudaLaunchError) as info:
        narrow_floats_raise(ADDR, a, h, (1.0, t1))
    assert "%s was given a float64 value too large for it (it would launch as infinity)" \
        % where in str(info.value)


@njit
def narrow_floats_raise(p, a, h, t):
    eager_narrow_floats[1, 1](view(p), a, h, t)


def test_runtime_floats_a_narrower_parameter_holds_are_launched(fake_driver):
    # the largest finite values, rounding below the overflow bound, and what
    # is not finite (infinity and NaN are values of the narrower type too)
    cases = [(3.4028234e38, 65504.0), (-3.4028235e38, 65519.0), (np.inf, -np.inf),
             (np.nan, np.nan), (1e-50, 1e-10)]
    for a, h in cases:
        assert narrow_floats_status(ADDR, a, h, (a, 1.0)) == 0
    got = [(struct.unpack("<f", l.params[-4])[0], struct.unpack("<e", l.params[-3])[0])
           for l in fake_driver.launches]
    expected = [(np.float32(a), np.float16(h)) for a, h in cases]
    assert len(got) == len(expected)
    for (ga, gh), (ea, eh) in zip(got, expected):
        assert (ga == ea or (np.isnan(ga) and np.isnan(ea))) and \
            (gh == eh or (np.isnan(gh) and np.isnan(eh)))


# -- 6. the recording driver --------------------------------------------------------

def test_recorders_nest_and_the_innermost_records():
    with RecordingDriver() as outer:
        with RecordingDriver() as inner:
            launch_view(ADDR, 4)
        launch_view(ADDR, 4)
    assert len(inner.launches) == 1 and len(outer.launches) == 1


def test_recorder_exited_out_of_order_raises_and_restores_the_table():
    from numba_cuda_launch.cudadrv import driver

    before = driver.current_functions()
    outer, inner = RecordingDriver(), RecordingDriver()
    outer.__enter__()
    inner.__enter__()
    with pytest.raises(RuntimeError, match="end the innermost first"):
        outer.__exit__(None, None, None)
    assert driver.current_functions() == before
    inner.__exit__(None, None, None)  # already ended with the outer one
    assert driver.current_functions() == before
    with RecordingDriver() as fresh:  # the table works as before
        assert launch_view(ADDR, 4) == 0
    assert len(fresh.launches) == 1
    assert inner.launches == [] and outer.launches == []


def test_recorder_entered_twice_raises():
    rec = RecordingDriver()
    with rec:
        with pytest.raises(RuntimeError, match="already active"):
            rec.__enter__()


def test_parameter_bytes_recorded_without_register(fake_driver):
    assert i8_status(ADDR, 5) == 0
    params = fake_driver.launches[0].params
    assert params is not None and len(params) == 8  # array (7) + int8
    assert struct.unpack("<q", params[4])[0] == ADDR  # data pointer
    assert params[-1] == b"\x05"


# -- 7. kernel_handle -------------------------------------------------------------------

@pytest.mark.parametrize("argtypes, what", [
    ("int32(float32[::1], float32)", "kernels return nothing"),
    ("void(float32[::1], float32", "does not parse"),
    (None, "got None"),
    (nt.float32[::1], "got the bare type"),
    ([1, 2], "got [1, 2]"),
])
def test_kernel_handle_refuses_bad_signatures(argtypes, what):
    with pytest.raises(TypeError) as info:
        ncl.kernel_handle(fill, argtypes)
    assert "kernel_handle('fill'" in str(info.value) and what in str(info.value)


def test_kernel_handle_of_something_else():
    with pytest.raises(TypeError, match="needs a kernel"):
        ncl.kernel_handle(len, (nt.int32,))


@pytest.mark.parametrize("status", [200, 209, 218, 222])
def test_an_image_the_driver_cannot_load_says_so(status):
    @njit
    def f(p):
        fill[1, 32](view(p), 1.0)

    with RecordingDriver(load_status=status):
        with pytest.raises(ncl.CudaLaunchError) as info:
            f(ADDR)
    assert info.value.code == status
    assert "loading the kernel's image into the current context failed" in str(info.value)


def test_a_kernel_whose_parameters_exceed_the_limit_says_how_large_they_are():
    @cuda.jit
    def takes_tuple(t):
        pass

    ns = {"takes_tuple": takes_tuple}
    exec("def f():\n    takes_tuple[1, 1]((%s,))\n" % ", ".join(["1"] * 4100), ns)
    with pytest.raises(TypingError) as info:
        njit(ns["f"])()
    assert first_line(info.value).startswith("compiling kernel 'takes_tuple' for (t: UniTuple(")
    assert "(its parameters take 32800 bytes; a CUDA kernel takes at most 32764: " \
        "pass large data in device memory)" in str(info.value)


def test_kernel_handle_of_a_device_function_says_so():
    with pytest.raises(TypeError) as info:
        ncl.kernel_handle(device_fn, "int32(int32)")
    assert str(info.value) == (
        "kernel_handle('device_fn', ...): it is a CUDA device function (cuda.jit(device=True)), "
        "which cannot be launched; kernel_handle() takes a kernel")


@pytest.mark.skipif(HAVE_GPU, reason="a configured compute capability applies only "
                    "without a GPU (with one, images are built for the device)")
def test_unsupported_architecture_is_reported_not_shipped_as_ptx():
    @cuda.jit
    def arch_probe(x):
        x[0] = 1

    ncl.set_compute_capability((99, 0))
    try:
        with pytest.raises(TypingError, match="building its cubin for compute capability "
                                              r"\(99, 0\) failed"):
            ncl.kernel_handle(arch_probe, (nt.float32[::1],))
    finally:
        ncl.set_compute_capability((9, 0))


# -- 10. float16 in and out of CPU functions ---------------------------------------------

def test_float16_argument_of_cpu_function_is_refused_with_a_sentence():
    @njit
    def ident(x):
        return x

    with pytest.raises(NumbaError) as info:
        ident(np.float16(1.5))
    assert first_line(info.value).startswith(
        "float16 values cannot be passed into or returned from CPU nopython functions")


def test_float16_result_of_cpu_function_is_refused_with_a_sentence():
    @njit
    def half_ptr_value(p):
        return numba.carray(ncl.as_voidptr(p), (1,), np.float16)[0]

    with pytest.raises(NumbaError, match="float16 values cannot be passed"):
        half_ptr_value(ADDR)


# -- 11. the package's sentence comes first ---------------------------------------------

@pytest.mark.parametrize("body, what", [
    ("fill[g, 32](view(p), 1.0)",
     "kernel 'fill': griddim must be an integer or a tuple of 1 to 3 integers, got float64"),
    ("fill[1, 32, 0, 0, 1, 1](view(p), 1.0)",
     "kernel 'fill': a launch configuration is [griddim, blockdim]"),
    ("device_fn[1, 32](view(p))",
     "'device_fn' is a CUDA device function (cuda.jit(device=True))"),
    ("fill[1, 32, 1.5](view(p), 1.0)", "kernel 'fill': the stream must be"),
    ("fill[1, 32, 0, g](view(p), 1.0)", "kernel 'fill': sharedmem must be an integer"),
])
def test_configuration_errors_are_the_first_line(body, what):
    ns = {"fill": fill, "view": view, "device_fn": device_fn}
    exec("def f(p, g):\n    %s\n" % body, ns)
    assert typing_error(ns["f"], nt.intp, nt.float64).startswith(what)


def test_typing_error_class_is_numbas():
    # Numba re-raises typing errors as its own TypingError: that is the
    # class to catch (the README says so).
    def f(p, g):
        fill[g, 32](view(p), 1.0)
    with pytest.raises(TypingError):
        njit((nt.intp, nt.float64))(f)


def _compile_each_way(body):
    """The error of each way compiling *body* (``def f(p, g)``) is reached:
    a lazy ``@njit`` call, ``@njit`` with a signature, ``@cfunc``, and an
    ``@njit`` function calling it (compiled for its caller)."""
    ns = {"fill": fill, "view": view, "njit": njit}
    exec("def f(p, g):\n    %s\n" % body, ns)
    lazy = njit(ns["f"])
    outer_ns = {"inner": njit(ns["f"])}
    exec("def outer(p, g):\n    inner(p, g)\n", outer_ns)
    ways = {
        "lazy call": lambda: lazy(ADDR, 1.5),
        "signature": lambda: njit((nt.intp, nt.float64))(ns["f"]),
        "cfunc": lambda: numba.cfunc(nt.void(nt.intp, nt.float64))(ns["f"]),
        "nested": lambda: njit(outer_ns["outer"])(ADDR, 1.5),
        "lazy call again": lambda: lazy(ADDR, 1.5),  # Numba raises its kept error again
    }
    errors = {}
    for name, way in ways.items():
        with pytest.raises(TypingError) as info:
            way()
        errors[name] = info.value
    return errors


@pytest.mark.parametrize("body, what", [
    ("fill[g, 32](view(p), 1.0)",
     "kernel 'fill': griddim must be an integer or a tuple of 1 to 3 integers, got float64"),
    ("fill[1, 32](view(p), view)",
     "kernel 'fill' parameter 'v' (argument 2): got "),
])
def test_the_sentence_leads_the_error_however_the_function_is_compiled(body, what):
    # The user's first line is the package's sentence, not Numba's
    # "Failed in nopython mode pipeline" header (one per enclosing function),
    # and the sentence is not repeated below.
    for name, exc in _compile_each_way(body).items():
        text = str(exc)
        assert first_line(exc).startswith(what), (name, text)
        assert "Failed in nopython mode pipeline" in text, name  # Numba's context kept
        assert sum(what in line for line in text.splitlines()) == 1, (name, text)


# The package's name as its messages spell it (numba.cuda.cpu_launch when
# tested as the patched numba-cuda).
_PACKAGE = ncl.stream_synchronize.__module__.rsplit(".launch.", 1)[0]


@pytest.mark.parametrize("call, what", [
    ("ncl.as_voidptr(1.5)", "as_voidptr() takes an integer address, got float64"),
    ("ncl.stream_synchronize(1.5)", _PACKAGE + ".stream_synchronize(): the stream must be"),
    ("ncl.event(timing='yes')", _PACKAGE + ".event(): timing must be a bool"),
])
def test_refusals_numba_lists_among_candidates_lead_too(call, what):
    # Numba quotes an overload's error in its list of candidates
    # ("NopythonUsageError: ..."); the sentence still comes first.
    ns = {"ncl": ncl}
    exec("def f():\n    return %s\n" % call, ns)
    with pytest.raises(TypingError) as info:
        njit(ns["f"])()
    assert first_line(info.value).startswith(what), str(info.value)


def test_numbas_own_errors_keep_their_first_line():
    def f(p, g):
        return undefined_name + p  # noqa: F821
    with pytest.raises(TypingError) as info:
        njit((nt.intp, nt.float64))(f)
    assert first_line(info.value).startswith("Failed in nopython mode pipeline")


def test_device_array_element_access_leads_with_the_reason():
    class Producer:
        def __init__(self):
            self.__cuda_array_interface__ = {
                "shape": (4,), "typestr": "<f4", "data": (ADDR, False), "version": 3,
                "strides": None, "stream": None}

    @njit
    def read_first(d):
        return d[0]

    with pytest.raises(TypingError) as info:
        read_first(Producer())
    assert first_line(info.value).startswith(
        "DeviceArray(float32, 1d, C)[Literal[int](0)]: reading or writing elements of a "
        "device array on the host would dereference device memory")


# -- 12. clear messages instead of internal exceptions ----------------------------------

def test_kernel_called_without_configuration():
    def f(p):
        fill(view(p), 1.0)
    assert typing_error(f, nt.intp).startswith(
        "kernel 'fill' is called without a launch configuration: write fill[griddim, blockdim]")


def test_hasattr_and_getattr_with_a_default_on_a_kernel_still_work():
    @njit
    def probe():
        return hasattr(fill, "configure"), getattr(fill, "foo", 3)

    assert probe() == (False, 3)


@pytest.mark.parametrize("attr", ["configure(1, 32)", "forall(4)", "py_func"])
def test_kernel_attributes_in_compiled_code_name_the_way_to_launch(attr):
    ns = {"fill": fill, "view": view}
    exec("def f(p):\n    x = fill.%s\n" % attr, ns)
    name = attr.split("(")[0]
    assert typing_error(ns["f"], nt.intp) == (
        "kernel 'fill': .%s is not available in compiled code; launch the kernel with "
        "fill[griddim, blockdim](args...) (or [griddim, blockdim, stream, sharedmem])" % name)


def test_device_function_called_from_cpu_code():
    def f(p):
        device_fn(view(p))
    assert "'device_fn' is a CUDA device function" in typing_error(f, nt.intp)


def test_star_args_kernel_is_refused():
    def f(p):
        star_args[1, 1](view(p), 1)
    assert typing_error(f, nt.intp).startswith(
        "kernel 'star_args' has a *args parameter 'args'")


@njit
def launch_with_defaults(p):
    return (with_defaults[1, 1].launch_status(view(p)),
            with_defaults[1, 1].launch_status(view(p), 7),
            with_defaults[1, 1].launch_status(view(p), 7, 0.5))


def test_kernel_defaults_are_filled_in(fake_driver):
    assert launch_with_defaults(ADDR) == (0, 0, 0)
    tail = [(struct.unpack("<q", l.params[-2])[0], struct.unpack("<d", l.params[-1])[0])
            for l in fake_driver.launches]
    assert tail == [(3, 2.5), (7, 2.5), (7, 0.5)]


def test_namedtuple_argument_is_refused():
    Pair = collections.namedtuple("Pair", "a b")

    def f(p):
        fill[1, 1](view(p), Pair(1, 2))
    msg = typing_error(f, nt.intp)
    assert "kernel 'fill' parameter 'v' (argument 2)" in msg and "namedtuple (Pair)" in msg


@cuda.jit
def takes_pair(p):
    pass


@cuda.jit("void(Tuple((int64, float64)))")
def takes_pair_eager(p):
    pass


@pytest.mark.parametrize("kernel", [takes_pair, takes_pair_eager], ids=["lazy", "eager"])
def test_namedtuple_is_refused_where_a_plain_tuple_of_its_items_was_compiled(kernel, fake_driver):
    # the overload for the plain tuple exists (compiled, or the signature):
    # the namedtuple is refused, not lowered through Numba's unimplemented
    # namedtuple-to-tuple cast (a NotImplementedError)
    Pair = collections.namedtuple("Pair", "a b")

    @njit
    def plain(t):
        kernel[1, 1](t)
    plain((1, 2.0))
    assert len(fake_driver.launches) == 1

    def named(p):
        kernel[1, 1](Pair(p, 2.0))

    def nested(p):
        kernel[1, 1]((p, Pair(p, 2.0)))
    msg = typing_error(named, nt.int64)
    assert msg.startswith("kernel '%s' parameter 'p' (argument 1): got Pair(int64, float64)"
                          % kernel.py_func.__name__) and "namedtuple (Pair)" in msg
    assert "namedtuple (Pair)" in typing_error(nested, nt.int64)


def test_raising_launch_inside_prange_is_refused():
    @njit(parallel=True)
    def par(p, n):
        out = np.zeros(n)
        for i in prange(n):
            fill[1, 1](view(p), 1.0)
            out[i] = i
        return out.sum()

    with pytest.raises(NumbaError) as info:
        par(ADDR, 8)
    assert first_line(info.value).startswith(
        "kernel 'fill': a launch that raises on failure cannot be used inside prange")


def test_status_launch_inside_prange_works(fake_driver):
    @njit(parallel=True)
    def par(p, n):
        st = np.zeros(n, np.int32)
        for i in prange(n):
            st[i] = fill[1, 1].launch_status(view(p), 1.0)
        return st.max()

    assert par(ADDR, 8) == 0
    assert len(fake_driver.launches) == 8


@pytest.mark.parametrize("value, what", [
    (9.0, "floats are ambiguous"),
    ((9,), "a tuple of two integers is needed"),
    ((9, 0, 1), "a tuple of two integers is needed"),
    ("garbage", "'garbage' is not a compute capability"),
    ("sm_", "is not a compute capability"),
    ((2, 0), "is not a compute capability"),
    ("sm_90a", "architecture-specific targets such as sm_90a are not built"),
    ("100f", "architecture-specific targets such as sm_90a are not built"),
    ((10**30, 0), "(compute capabilities are 3.0 to 99.9: a major version of 3 to 99 and "
                  "a minor of 0 to 9)"),
    ((100, 0), "(100, 0) is not a compute capability (compute capabilities are 3.0 to 99.9"),
    ("sm_1000", "'sm_1000' is not a compute capability (compute capabilities are 3.0 to 99.9"),
    ([(9, 0), (10**30, 0)], "item 1: (1000000000000000000000000000000, 0) is not a compute "
                            "capability (compute capabilities are 3.0 to 99.9"),
])
def test_set_compute_capability_refuses_with_a_sentence(value, what):
    before = ncl.get_compute_capability()
    with pytest.raises(ValueError) as info:
        ncl.set_compute_capability(value)
    assert "set_compute_capability()" in str(info.value) and what in str(info.value)
    assert ncl.get_compute_capability() == before  # unchanged


@pytest.mark.parametrize("setting", ["1000.0", "8.0 100.0", str(10**30) + ".0"])
def test_env_compute_capability_out_of_range_is_refused_naming_the_variable(monkeypatch,
                                                                           setting):
    from numba_cuda_launch import config

    monkeypatch.setattr(config, "_configured", None)
    monkeypatch.setenv("NUMBA_CUDA_LAUNCH_CC", setting)
    with pytest.raises(ValueError) as info:
        ncl.get_compute_capability()
    assert str(info.value).startswith("NUMBA_CUDA_LAUNCH_CC")
    assert "is not a compute capability (compute capabilities are 3.0 to 99.9" in str(info.value)


@pytest.mark.parametrize("spelling, expected", [
    ("9.0", (9, 0)), ("9,0", (9, 0)), ("90", (9, 0)), ("sm_90", (9, 0)), ("compute_90", (9, 0)),
    ((9, 0), (9, 0)), ((np.int64(9), 0), (9, 0)), ("99.9", (99, 9)), ((3, 0), (3, 0))])
def test_compute_capability_spellings(spelling, expected):
    before = ncl.get_compute_capability()
    try:
        ncl.set_compute_capability(spelling)
        assert ncl.get_compute_capability() == expected
    finally:
        ncl.set_compute_capability(before)


def run_child(code, **env):
    out = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(code)],
                         env=child_env(**env), capture_output=True, text=True, timeout=300)
    return out


@pytest.mark.slow
def test_env_compute_capability_spellings_in_a_fresh_process():
    code = """
        import numba_cuda_launch as ncl
        print(ncl.get_compute_capability())
    """
    for spelling in ("9.0", "90", "sm_90"):
        out = run_child(code, NUMBA_CUDA_LAUNCH_CC=spelling)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "(9, 0)"


# A child's launch of a lazy kernel from @njit under the recording driver:
# prints "compiled" or the first line of the error.
LAUNCH_IN_CHILD = """
    import numba, numpy as np
    from numba import cuda, njit
    import numba_cuda_launch as ncl

    @cuda.jit
    def k(x):
        pass

    @njit
    def f(p):
        k[1, 1](numba.carray(ncl.as_voidptr(p), (4,), np.float32))

    from numba_cuda_launch.testing import RecordingDriver
    try:
        with RecordingDriver():
            f(4096)
        print("compiled")
    except Exception as exc:
        print(str(exc).splitlines()[0])
"""


@pytest.mark.slow
def test_malformed_env_compute_capability_names_the_variable():
    out = run_child(LAUNCH_IN_CHILD, NUMBA_CUDA_LAUNCH_CC="garbage")
    assert out.returncode == 0, out.stderr
    # read with a GPU too (a list of architectures applies there): the same error
    assert "NUMBA_CUDA_LAUNCH_CC: 'garbage' is not a compute capability" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="with a GPU the eager kernel compiles")
def test_eager_kernel_with_no_gpu_gets_the_hint():
    code = """
        from numba import cuda
        import numba_cuda_launch
        try:
            @cuda.jit("void(float32[::1])")
            def k(x):
                pass
        except Exception as exc:
            print(type(exc).__name__, exc)
    """
    out = run_child(code, NUMBA_CUDA_LAUNCH_CC="")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("CudaSupportError")  # numba-cuda's own error class
    # (the module's name differs in the patched numba-cuda: numba.cuda.cpu_launch)
    assert "set NUMBA_CUDA_LAUNCH_CC=9.0 or call" in out.stdout
    assert ".set_compute_capability((9, 0))" in out.stdout


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="with a GPU the kernel compiles")
def test_lazy_kernel_with_no_gpu_says_what_to_do_on_the_first_line():
    out = run_child(LAUNCH_IN_CHILD, NUMBA_CUDA_LAUNCH_CC="")
    assert out.returncode == 0, out.stderr
    first = first_line(out.stdout)
    # (the package's name differs in the patched numba-cuda: numba.cuda.cpu_launch)
    assert first.startswith("compiling kernel 'k' for (x: array(float32, 1d, C)) failed: "
                            "no usable GPU and no architecture configured: set "
                            "NUMBA_CUDA_LAUNCH_CC=9.0 or call "), first
    assert ".set_compute_capability((9, 0)) to compile without one" in first

# -- 4. cache=True across launch targets ----------------------------------------------

CACHE_MAIN = """
import contextlib, os
import numpy as np
import cachemod
from numba_cuda_launch.testing import RecordingDriver
a = np.zeros(4, np.float32)
# no real launch on host memory, GPU or not (the simulator's runs on it, and
# the recording driver refuses to start there)
simulated = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
with contextlib.nullcontext() if simulated else RecordingDriver():
    status = cachemod.run(a.ctypes.data, 4)
hits = sum(cachemod.run.stats.cache_hits.values())
print(status, a.tolist(), hits)
"""


@pytest.mark.slow
def test_cached_code_is_keyed_on_the_launch_target(tmp_path):
    (tmp_path / "cachemod.py").write_text(CACHED_LAUNCHER)

    def run(**env):
        out = subprocess.run([sys.executable, "-c", PREAMBLE + CACHE_MAIN], cwd=tmp_path,
                             env=child_env(**env), capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    driver90 = dict(NUMBA_CUDA_LAUNCH_CC="9.0", NUMBA_ENABLE_CUDASIM="0")
    sim = dict(NUMBA_ENABLE_CUDASIM="1")
    first = run(**driver90)
    assert first[:2] == ["0", "[0.0,"] and first[-1] == "0"  # recorded, compiled
    simulated = run(**sim)
    assert simulated[:2] == ["0", "[1.0,"]  # really simulated, not the cached driver code
    simulated_again = run(**sim)
    assert simulated_again[:2] == ["0", "[1.0,"] and simulated_again[-1] == "0"
    back = run(**driver90)
    # the simulator's entry unused, and the driver's still there: a cache hit
    assert back[:2] == ["0", "[0.0,"] and back[-1] == "1"
    if not HAVE_GPU:  # with a GPU the device decides the architecture
        other_arch = run(NUMBA_CUDA_LAUNCH_CC="8.0", NUMBA_ENABLE_CUDASIM="0")
        assert other_arch[-1] == "0"  # another architecture: compiled again


@pytest.mark.parametrize("value", [1.5, 1.0, "1", None, True, np.float64(2.0)])
def test_error_name_refuses_what_is_no_cuda_status(value):
    # (before: int() truncated 1.5 to CUDA_ERROR_INVALID_VALUE, True was 1)
    with pytest.raises(TypeError, match=r"error_name\(\) takes a CUresult, an integer; got "):
        ncl.error_name(value)


@pytest.mark.parametrize("value, name", [(0, "CUDA_SUCCESS"),
                                         (np.int32(2), "CUDA_ERROR_OUT_OF_MEMORY"),
                                         (700, "CUDA_ERROR_ILLEGAL_ADDRESS")])
def test_error_name_of_integers(value, name):
    assert ncl.error_name(value) == name
