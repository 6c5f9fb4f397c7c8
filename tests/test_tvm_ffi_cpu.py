"""Kernels as TVM-FFI functions, on the CPU: ``tvm_ffi_kernel`` functions called
from Python with tensors over host memory that claim a CUDA device (tests/support/
tvm_tensors.py), their launches recorded by the recording driver; every argument
the kernel cannot take refused with a TVM-FFI error naming the kernel and the
parameter and no launch; hand-written TVM-FFI cfuncs using the readers."""

import struct

import numba
import numpy as np
import pytest
from numba.core import types as nt

from support import needs_numba_cuda

needs_numba_cuda()
tvm_ffi = pytest.importorskip("tvm_ffi")

from numba import cuda  # noqa: E402

from numba_cuda_launch import tvm_ffi as ntf  # noqa: E402
from support.kernels import axpy, axpy_blocks  # noqa: E402
from support.tvm_tensors import cuda_tensor  # noqa: E402

rng = np.random.default_rng()
SIG = nt.int32(nt.voidptr, nt.voidptr, nt.int32, nt.voidptr)


@cuda.jit
def scale_rows(m, out, k, flag, h):
    i = cuda.grid(1)
    if i < m.shape[0] and flag:
        for j in range(m.shape[1]):
            out[i, j] = m[i, j] * k + h


def f32(n):
    return rng.standard_normal(n).astype(np.float32)


def params(launch):
    return launch.params


def word(b, fmt="<q"):
    return struct.unpack(fmt, b[:struct.calcsize(fmt)])[0]


def array_params(launch, index, ndim):
    """(nitems, itemsize, data, shape, strides) of the array whose parameters
    start at *index* (numba-cuda's kernel ABI)."""
    p = launch.params[index:index + 5 + 2 * ndim]
    return (word(p[2]), word(p[3]), word(p[4]), tuple(word(b) for b in p[5:5 + ndim]),
            tuple(word(b) for b in p[5 + ndim:]))


@pytest.fixture(scope="module")
def axpy_fn():
    return ntf.tvm_ffi_kernel(axpy, axpy_blocks, arrays=[(np.float32, 1)] * 3,
                              scalars={"a": np.float32})


def test_a_call_launches_the_kernel_on_the_tensors_with_the_rule_s_grid(fake_driver, axpy_fn):
    n = int(rng.integers(300, 3000))
    x, y, out = f32(n), f32(n), f32(n)
    tx, ty, to = cuda_tensor(x), cuda_tensor(y), cuda_tensor(out)
    a = float(rng.standard_normal())
    axpy_fn(tx, ty, to, a)
    (launch,) = fake_driver.launches
    assert launch.grid == ((n + 255) // 256, 1, 1) and launch.block == (256, 1, 1)
    assert launch.sharedmem == 0 and launch.cluster is None and not launch.dependent
    for k, arr in enumerate((x, y, out)):
        assert array_params(launch, 7 * k, 1) == (n, 4, arr.ctypes.data, (n,), (4,))
    assert word(launch.params[21], "<f") == np.float32(a)
    assert launch.stream == 0  # no stream set in the TVM-FFI environment


def test_the_function_is_a_tvm_ffi_function_callable_as_such(fake_driver, axpy_fn):
    assert isinstance(axpy_fn.function, tvm_ffi.Function)
    x = f32(64)
    axpy_fn.function(cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 1)
    assert len(fake_driver.launches) == 1


def test_the_stream_is_the_tvm_ffi_environment_s(fake_driver, axpy_fn):
    stream = fake_driver.add_stream(0x5000, 0)
    x = f32(100)
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cuda:0"), stream):
        axpy_fn(cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 2.0)
    axpy_fn(cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 2.0)
    assert [launch.stream for launch in fake_driver.launches] == [stream, 0]


def test_tensors_of_another_device_than_the_launch_s_are_refused(axpy_fn):
    # tensors on device 1: refused while device 0 is current (the default
    # stream) or with device 0's stream set; launched on device 1's stream
    # or with device 1 current; managed memory from any device
    from numba_cuda_launch.testing import RecordingDriver

    with RecordingDriver(device_count=2) as fake_driver:
        _launches_on_the_tensors_device_only(fake_driver, axpy_fn)


def _launches_on_the_tensors_device_only(fake_driver, axpy_fn):
    x = f32(100)
    on1 = [cuda_tensor(x, device=(2, 1)) for _ in range(3)]
    for stream in (None, fake_driver.add_stream(0x5000, 0)):
        if stream is None:
            info = refusal(axpy_fn, fake_driver, *on1, 1.0)
        else:
            with tvm_ffi.use_raw_stream(tvm_ffi.device("cuda:1"), stream):
                info = refusal(axpy_fn, fake_driver, *on1, 1.0)
        assert info.type is ValueError
        assert str(info.value).startswith("numba_cuda_launch: CUDA kernel 'axpy': the tensors are "
                                          "on CUDA device 1, but a launch on the stream")
        assert "runs on device 0" in str(info.value)
    stream1 = fake_driver.add_stream(0x6000, 1)
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cuda:1"), stream1):
        axpy_fn(*on1, 1.0)
    fake_driver.use_device(1)
    axpy_fn(*on1, 1.0)
    fake_driver.use_device(0)
    axpy_fn(*[cuda_tensor(x, device=(13, 1)) for _ in range(3)], 1.0)
    assert [(l.stream, l.device) for l in fake_driver.launches] == [(stream1, 1), (0, 1), (0, 0)]


def test_static_dims_sharedmem_cluster_and_dependent_launch_forms(fake_driver):
    fn = ntf.tvm_ffi_kernel(axpy, (8, 64), arrays=[(np.float32, 1)] * 3,
                            scalars={"a": np.float32}, sharedmem=1024, cluster=2,
                            dependent=True)
    x = f32(512)
    fn(cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 1.5)
    (launch,) = fake_driver.launches
    assert (launch.grid, launch.block, launch.sharedmem) == ((8, 1, 1), (64, 1, 1), 1024)
    assert tuple(launch.cluster) == (2, 1, 1) and launch.dependent


def test_scalars_of_every_kind_arrive_converted(fake_driver):
    fn = ntf.tvm_ffi_kernel(scale_rows, ((1, 1), (32, 1)), arrays=[(np.float64, 2)] * 2,
                            scalars={"k": np.int8, "flag": np.bool_, "h": np.float16})
    m, out = rng.standard_normal((4, 3)), np.zeros((4, 3))
    fn(cuda_tensor(m), cuda_tensor(out), -5, True, 0.5)
    p = fake_driver.launches[0].params
    assert array_params(fake_driver.launches[0], 0, 2) == (12, 8, m.ctypes.data, (4, 3), (24, 8))
    assert word(p[18], "<b") == -5 and word(p[19], "<?") is True
    assert word(p[20], "<e") == np.float16(0.5)


def refusal(fn, fake_driver, *args):
    with pytest.raises((TypeError, ValueError)) as info:
        fn(*args)
    assert fake_driver.launches == []
    return info


@pytest.mark.parametrize("case, kind, words", [
    ("count", TypeError, ["takes 4 arguments (x, y, out, a); got 3"]),
    ("dtype", TypeError, ["parameter 'y' (argument 1)", "float32 tensor of rank 1",
                          "got float64"]),
    ("rank", TypeError, ["parameter 'out' (argument 2)", "got float32", "of rank 2"]),
    ("lanes", TypeError, ["parameter 'x' (argument 0)", "a DLPack type the kernels do not "
                          "take (DLPack code 2, 32 bits, 2 lanes)"]),
    ("host", TypeError, ["parameter 'x' (argument 0)", "host (CPU) memory",
                         "CUDA device memory"]),
    ("strided", ValueError, ["parameter 'y' (argument 1) is not C-contiguous"]),
    ("misaligned", ValueError, ["parameter 'x' (argument 0)", "not aligned"]),
    ("null data", ValueError, ["parameter 'x' (argument 0)", "its data pointer is NULL, and "
                               "it is not empty"]),
    ("not a tensor", TypeError, ["parameter 'out' (argument 2)", "got an int"]),
    ("devices", TypeError, ["parameter 'y' (argument 1) is on device 1",
                            "parameter 'x' (argument 0) on device 0"]),
    ("float scalar", TypeError, ["scalar 'a' (argument 3)", "got a string"]),
    ("overflow", ValueError, ["scalar 'a' (argument 3)", "out of the range of float32"]),
])
def test_a_wrong_argument_is_refused_naming_kernel_and_parameter(
        fake_driver, axpy_fn, case, kind, words):
    n = 64
    x, y, out = f32(n), f32(n), f32(n)
    args = [cuda_tensor(x), cuda_tensor(y), cuda_tensor(out), 1.0]
    if case == "count":
        args = args[:3]
    elif case == "dtype":
        args[1] = cuda_tensor(y.astype(np.float64))
    elif case == "rank":
        args[2] = cuda_tensor(out.reshape(8, 8))
    elif case == "lanes":
        args[0] = cuda_tensor(x[:n // 2], dl_dtype=(2, 32, 2))
    elif case == "host":
        args[0] = x
    elif case == "strided":
        args[1] = cuda_tensor(f32(2 * n)[::2])
    elif case == "misaligned":
        args[0] = cuda_tensor(x, byte_offset=2)
    elif case == "null data":
        args[0] = cuda_tensor(x, data=0)
    elif case == "not a tensor":
        args[2] = 7
    elif case == "devices":
        args[1] = cuda_tensor(y, device=(2, 1))
    elif case == "float scalar":
        args[3] = "two"
    elif case == "overflow":
        args[3] = 1e39
    info = refusal(axpy_fn, fake_driver, *args)
    assert info.type is kind
    text = str(info.value)
    assert "CUDA kernel 'axpy'" in text
    for w in words:
        assert w in text, (w, text)


@pytest.mark.parametrize("k, flag, h, kind, words", [
    (1.5, True, 0.0, TypeError, ["scalar 'k' (argument 2)", "float -> integer"]),
    (128, True, 0.0, ValueError, ["scalar 'k' (argument 2)", "128 is out of the range of int8"]),
    (1, 1, 0.0, TypeError, ["scalar 'flag' (argument 3)", "True or False", "got an int"]),
    (1, True, 65520.0, ValueError, ["scalar 'h' (argument 4)", "out of the range of float16"]),
])
def test_a_scalar_that_would_change_is_refused(fake_driver, k, flag, h, kind, words):
    fn = ntf.tvm_ffi_kernel(scale_rows, ((1, 1), (32, 1)), arrays=[(np.float64, 2)] * 2,
                            scalars={"k": np.int8, "flag": np.bool_, "h": np.float16})
    m = np.zeros((2, 2))
    info = refusal(fn, fake_driver, cuda_tensor(m), cuda_tensor(m), k, flag, h)
    assert info.type is kind
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_the_largest_values_that_stay_finite_pass(fake_driver):
    fn = ntf.tvm_ffi_kernel(scale_rows, ((1, 1), (32, 1)), arrays=[(np.float64, 2)] * 2,
                            scalars={"k": np.int8, "flag": np.bool_, "h": np.float16})
    m = np.zeros((2, 2))
    fn(cuda_tensor(m), cuda_tensor(m), -128, False, 65519.0)
    assert word(fake_driver.launches[0].params[20], "<e") == np.float16(65504)


def test_a_launch_rule_outside_cuda_s_limits_is_refused(fake_driver):
    @numba.njit
    def too_wide(xs, ys, outs, a):
        return 1, 2048

    fn = ntf.tvm_ffi_kernel(axpy, too_wide, arrays=[(np.float32, 1)] * 3,
                            scalars={"a": np.float32})
    x = f32(8)
    info = refusal(fn, fake_driver, cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 1.0)
    assert info.type is ValueError and "block (2048, 1, 1)" in str(info.value)


def test_a_failed_launch_is_a_runtime_error_with_the_driver_s_name(axpy_fn):
    from numba_cuda_launch.testing import RecordingDriver

    x = f32(8)
    with RecordingDriver(launch_status=701):
        with pytest.raises(RuntimeError, match=r"CUDA kernel 'axpy' failed: "
                           r"CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES \(701\)"):
            axpy_fn(cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 1.0)


@pytest.mark.parametrize("kwargs, kind, words", [
    (dict(arrays=[(np.float32, 1)] * 2), TypeError, ["3 array parameter(s)"]),
    (dict(arrays=[(np.float32, 1)] * 3, scalars={"b": np.float32}), TypeError,
     ["scalars must be named"]),
    (dict(arrays=[(np.float32, 1), ("U4", 1), (np.float32, 1)]), TypeError,
     ["parameter 'y'", "cannot be passed"]),
    (dict(arrays=[(np.float32, 1)] * 3, cluster=0), ValueError, ["cluster"]),
    (dict(arrays=[(np.float32, 1)] * 3, dependent=1), TypeError, ["dependent"]),
])
def test_what_cannot_be_built_is_refused_when_building(kwargs, kind, words):
    kwargs.setdefault("scalars", {"a": np.float32})
    with pytest.raises(kind) as info:
        ntf.tvm_ffi_kernel(axpy, (1, 32), **kwargs)
    assert "'axpy'" in str(info.value)
    for w in words:
        assert w in str(info.value)


def test_a_python_launch_rule_is_refused():
    with pytest.raises(TypeError, match="@njit function"):
        ntf.tvm_ffi_kernel(axpy, lambda *a: (1, 32), arrays=[(np.float32, 1)] * 3,
                           scalars={"a": np.float32})


def test_arrays_given_as_examples():
    fn = ntf.tvm_ffi_kernel(axpy, (1, 32), arrays=[f32(3), f32(3), f32(3)],
                            scalars={"a": np.float32})
    assert fn.arrays == [(np.dtype(np.float32), 1)] * 3


# -- hand-written TVM-FFI functions ----------------------------------------------

@numba.cfunc(SIG)
def hand_axpy(self, args, num_args, result):
    err = ntf.check_call(num_args, 4, "hand_axpy")
    if err != ntf.OK:
        return err
    for i in range(3):
        if ntf.check_tensor(args, num_args, i, np.float32, 1, "hand_axpy") != ntf.OK:
            return ntf.ERROR
    if ntf.check_float(args, num_args, 3, np.float32, "hand_axpy") != ntf.OK:
        return ntf.ERROR
    x = ntf.tensor_as_array(ntf.arg_tensor(args, 0), 1, np.float32)
    y = ntf.tensor_as_array(ntf.arg_tensor(args, 1), 1, np.float32)
    out = ntf.tensor_as_array(ntf.arg_tensor(args, 2), 1, np.float32)
    if x.size != y.size or x.size != out.size:
        return ntf.error(ntf.c_string("ValueError"), ntf.c_string("hand_axpy: sizes differ"))
    s = ntf.tensor_stream(ntf.arg_tensor(args, 0))
    status = axpy[(x.size + 63) // 64, 64, s].launch_status(
        x, y, out, np.float32(ntf.arg_float(args, 3)))
    if status != 0:
        return ntf.launch_error(status, "hand_axpy")
    return ntf.OK


def test_a_hand_written_function_launches_and_raises(fake_driver):
    fn = tvm_ffi.Function.__from_extern_c__(hand_axpy.address, keep_alive_object=hand_axpy)
    x, y, out = f32(200), f32(200), f32(200)
    stream = fake_driver.add_stream(0x7000, 0)
    with tvm_ffi.use_raw_stream(tvm_ffi.device("cuda:0"), stream):
        fn(cuda_tensor(x), cuda_tensor(y), cuda_tensor(out), 3)
    (launch,) = fake_driver.launches
    assert launch.stream == stream and launch.grid == (4, 1, 1)
    assert array_params(launch, 14, 1)[2] == out.ctypes.data
    assert word(launch.params[21], "<f") == 3.0
    with pytest.raises(ValueError, match="hand_axpy: sizes differ"):
        fn(cuda_tensor(x), cuda_tensor(y), cuda_tensor(f32(3)), 3)
    with pytest.raises(TypeError, match="hand_axpy: argument 1 must be a float32 tensor"):
        fn(cuda_tensor(x), 5, cuda_tensor(out), 3)
    with pytest.raises(TypeError, match="hand_axpy: takes 4 argument"):
        fn()
    assert len(fake_driver.launches) == 1


@numba.cfunc(SIG)
def echo(self, args, num_args, result):
    """Writes what it reads of argument 0 (a tensor) and 1-4 into argument 5 (int64[16])."""
    t = ntf.arg_tensor(args, 0)
    o = ntf.tensor_as_array(ntf.arg_tensor(args, 5), 1, np.int64)
    o[0] = ntf.type_index(args, 0)
    o[1] = ntf.tensor_ndim(t)
    o[2] = ntf.tensor_dim(t, 0)
    o[3] = ntf.tensor_dim(t, 1)
    o[4] = ntf.tensor_stride(t, 0)
    o[5] = ntf.tensor_stride(t, 1)
    o[6] = ntf.tensor_device_type(t)
    o[7] = ntf.tensor_device_id(t)
    o[8] = ntf.tensor_dtype_code(t) * 1000 + ntf.tensor_dtype_bits(t) * 10 + \
        ntf.tensor_dtype_lanes(t)
    o[9] = ntf.tensor_is_contiguous(t)
    o[10] = ntf.arg_int(args, 1)
    o[11] = np.int64(ntf.arg_float(args, 2) * 4)
    o[12] = ntf.arg_bool(args, 3)
    o[13] = ntf.type_index(args, 4)
    o[14] = numba.carray(ntf.arg_pointer(args, 4), (1,), np.float64)[0] == \
        numba.carray(ntf.tensor_data(t), (1,), np.float64)[0]
    return ntf.OK


@pytest.mark.parametrize("view", ["c", "transposed"])
def test_the_readers_read_the_tensor_and_scalars(view):
    import ctypes

    fn = tvm_ffi.Function.__from_extern_c__(echo.address, keep_alive_object=echo)
    base = rng.standard_normal((3, 5)).astype(np.float64)
    a = base if view == "c" else base.T
    out = np.zeros(16, np.int64)
    fn(cuda_tensor(a, device=(2, 3)), -7, 2.25, True,
       ctypes.c_void_p(a.__array_interface__["data"][0]), out)
    rows, cols = a.shape
    assert list(out[:15]) == [ntf.TENSOR, 2, rows, cols, a.strides[0] // 8, a.strides[1] // 8,
                              ntf.DL_CUDA, 3, 2641, view == "c", -7, 9, 1, ntf.OPAQUE_PTR, 1]


# -- found by a sweep of unusual inputs --------------------------------------------

def test_a_launch_rule_that_raises_is_refused_without_a_launch(fake_driver):
    # (before: Numba printed the exception as unraisable and the call
    # returned success, launching nothing)
    @numba.njit
    def rule(xs, ys, outs, a):
        return xs[0] // (xs[0] - 64), 32  # 64 items: a division by zero

    fn = ntf.tvm_ffi_kernel(axpy, rule, arrays=[(np.float32, 1)] * 3, scalars={"a": np.float32})
    x = f32(64)
    info = refusal(fn, fake_driver, cuda_tensor(x), cuda_tensor(x), cuda_tensor(x), 1.0)
    assert info.type is ValueError and str(info.value) == (
        "numba_cuda_launch: CUDA kernel 'axpy': the launch rule raised an exception (call it "
        "from Python with the arrays' shapes and the scalars to see it)")
    y = f32(65)
    fn(cuda_tensor(y), cuda_tensor(y), cuda_tensor(y), 1.0)
    assert len(fake_driver.launches) == 1


@pytest.mark.parametrize("rule_result, returned", [((1.5, 32), "float64"), ((1, 2, 3), "3"),
                                                   (None, "none")])
def test_a_launch_rule_returning_no_grid_and_block_is_refused_when_building(rule_result,
                                                                            returned):
    # (before: Numba's "Failed in nopython mode pipeline", or a message naming
    # jax_kernel's launch= and not the kernel)
    @numba.njit
    def rule(xs, ys, outs, a):
        return rule_result

    with pytest.raises(TypeError) as info:
        ntf.tvm_ffi_kernel(axpy, rule, arrays=[(np.float32, 1)] * 3, scalars={"a": np.float32})
    first = str(info.value).splitlines()[0]
    assert first.startswith("kernel 'axpy': the launch= @njit function rule returns ")
    assert first.endswith("; it must return (grid, block), each an integer or a tuple of 1 to "
                          "3 integers") and returned in first, first


def test_a_launch_rule_of_the_wrong_arity_is_refused_naming_the_kernel():
    @numba.njit
    def rule(xs):
        return 1, 32

    with pytest.raises(TypeError) as info:
        ntf.tvm_ffi_kernel(axpy, rule, arrays=[(np.float32, 1)] * 3, scalars={"a": np.float32})
    assert str(info.value).splitlines()[0] == (
        "kernel 'axpy': the launch= @njit function rule cannot be compiled for the shapes of its "
        "3 array(s) and its 1 scalar(s) (UniTuple(int64, 1), UniTuple(int64, 1), "
        "UniTuple(int64, 1), float32):")


@pytest.mark.parametrize("kwargs, kind, message", [
    (dict(sharedmem=None), TypeError,
     "kernel 'axpy': sharedmem must be an integer number of bytes, got None"),
    (dict(arrays=[(None, 1)] * 3), TypeError,
     "kernel 'axpy' parameter 'x': expected (dtype, ndim) or an array (anything with .dtype "
     "and .shape), got tuple (None, 1)"),
    (dict(scalars={"a": np.longdouble}), TypeError,
     "kernel 'axpy' scalar 'a' must be a boolean, integer or float dtype (bool, int8 to int64, "
     "uint8 to uint64, float16, float32 or float64), got float128"),
])
def test_specs_that_were_taken_or_crashed_are_refused(kwargs, kind, message):
    # (before: int()'s TypeError for sharedmem=None; dtype None taken as
    # float64 (np.dtype(None)); NumbaNotImplementedError 'float128')
    kwargs = dict(dict(arrays=[(np.float32, 1)] * 3, scalars={"a": np.float32}), **kwargs)
    with pytest.raises(kind) as info:
        ntf.tvm_ffi_kernel(axpy, (1, 32), **kwargs)
    assert str(info.value) == message


def test_an_example_array_whose_ndim_is_not_an_integer_is_refused():
    class Spec:
        dtype, ndim, shape = np.float32, 1.5, (3,)

    with pytest.raises(TypeError, match="kernel 'axpy' parameter 'x': expected"):
        ntf.tvm_ffi_kernel(axpy, (1, 32), arrays=[Spec()] * 3, scalars={"a": np.float32})
