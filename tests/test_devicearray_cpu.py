"""Device arrays and stream objects as arguments of compiled launchers, on
the CPU: fake producers over host memory (the CUDA Array Interface, DLPack),
launches recorded by the recording driver and compared with the parameters
numba-cuda's own launch builds for the same array."""

import re
import struct
import sys

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core import types as nt
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from support.messages import first_line
from support.producers import CAI, CupyLikeStream, DLPackOnDevice, ProtocolStream  # noqa: F401
from numba_cuda_launch.launch.devicearray import DeviceArray

rng = np.random.default_rng()


@cuda.jit
def scale(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


@cuda.jit
def scale2d(x, out):
    i, j = cuda.grid(2)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 2 * x[i, j]


@cuda.jit
def writes(x):
    x[0] = 1


@cuda.jit("void(float32[::1], float32[::1])")
def eager_c(x, out):
    pass


@njit
def launch_scale(x, out, stream):
    scale[1, 32, stream](2.0, x, out)


@njit
def launch_2d(x, out):
    scale2d[(2, 2), (8, 8)](x, out)


def array_params(launch, first):
    """The 5 + 2*ndim parameters of the array starting at parameter *first*."""
    return [struct.unpack("<q", p)[0] for p in launch.params[first:]]


def expected_params(a):
    """numba-cuda's packing of an array (meminfo, parent, nitems, itemsize,
    data, shape..., strides...)."""
    return [0, 0, a.size, a.itemsize, a.ctypes.data] + list(a.shape) + list(a.strides)


@pytest.mark.parametrize("version", [2, 3])
def test_cai_arrays_launch_with_numba_cudas_parameters(fake_driver, version):
    x, out = rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)
    launch_scale(CAI(x, version), CAI(out, version), 0)
    (launch,) = fake_driver.launches
    params = [struct.unpack("<q", p)[0] if len(p) == 8 else None for p in launch.params]
    assert params[1:8] == expected_params(x)
    assert params[8:] == expected_params(out)


def test_cai_none_strides_means_c_contiguous(fake_driver):
    x = np.zeros((3, 4), np.float32)
    out = np.zeros((3, 4), np.float32)
    launch_2d(CAI(x, contiguous_strides=False), CAI(out))
    assert array_params(fake_driver.launches[0], 0)[:9] == expected_params(x)


@pytest.mark.parametrize("make, layout", [
    (lambda: np.zeros((4, 6), np.float32), "C"),
    (lambda: np.asfortranarray(np.zeros((4, 6), np.float32)), "F"),
    (lambda: np.zeros((8, 6), np.float32)[::2], "A"),
    (lambda: np.zeros((4, 6), np.float32)[:, 1:], "A"),
    (lambda: np.zeros((0, 6), np.float32), "C"),
])
def test_layout_from_strides(make, layout):
    a = make()
    assert numba.typeof(CAI(a)) == DeviceArray(nt.float32, 2, layout)


def test_non_contiguous_view_launches_with_its_strides(fake_driver):
    base = np.zeros((8, 6), np.float32)
    x, out = base[::2, 1:], np.zeros((4, 5), np.float32)[:, :]
    launch_2d(CAI(x), CAI(out))
    assert array_params(fake_driver.launches[0], 0)[:9] == expected_params(x)


def test_zero_size_array_launches(fake_driver):
    x = np.zeros(0, np.float32)
    launch_scale(CAI(x), CAI(x), 0)
    params = array_params(fake_driver.launches[0], 1)
    assert params[2] == 0 and params[5] == 0  # nitems, shape


def test_readonly_producer_gives_readonly_type():
    a = np.zeros(4, np.float32)
    assert numba.typeof(CAI(a, readonly=True)) == DeviceArray(nt.float32, 1, "C", readonly=True)


def test_kernel_writing_to_readonly_array_is_refused():
    @njit
    def f(x):
        writes[1, 1](x)

    with pytest.raises(TypingError) as info:
        f(CAI(np.zeros(4, np.float32), readonly=True))
    assert "kernel 'writes'" in str(info.value) and "readonly" in str(info.value)


def test_eager_kernel_takes_device_array_and_refuses_wrong_dtype(fake_driver):
    @njit
    def f(x, out):
        eager_c[1, 1](x, out)

    a = np.zeros(4, np.float32)
    f(CAI(a), CAI(a))
    assert len(fake_driver.launches) == 1
    with pytest.raises(TypingError, match="kernel 'eager_c' parameter 'x'"):
        f(CAI(np.zeros(4, np.float64)), CAI(a))


def test_host_attributes_and_views(fake_driver):
    @njit
    def f(x):
        v = x[2:, ::2]
        return (x.shape, x.strides, x.size, x.ndim, x.itemsize, x.nbytes,
                v.shape, v.strides)

    a = np.zeros((5, 6), np.float64)
    v = a[2:, ::2]
    assert f(CAI(a)) == (a.shape, a.strides, a.size, 2, 8, a.nbytes, v.shape, v.strides)


def test_view_launches_at_its_offset(fake_driver):
    @njit
    def f(x, out):
        scale[1, 32](2.0, x[3:], out[:5])

    a, out = np.zeros(8, np.float32), np.zeros(8, np.float32)
    f(CAI(a), CAI(out))
    params = fake_driver.launches[0].params
    assert struct.unpack("<q", params[5])[0] == a.ctypes.data + 12  # x.data
    assert struct.unpack("<q", params[3])[0] == 5  # x.nitems


@pytest.mark.parametrize("body", ["return x[0]", "return x[1, 2]", "x[0] = 1.0",
                                  "return x[x.shape[0] - 1]", "x[1:] = 2.0"])
def test_element_access_on_the_host_is_a_typing_error(body):
    ns = {}
    exec("def f(x):\n    %s\n" % body, ns)
    a = np.zeros((4, 4)) if "1, 2" in body else np.zeros(4)
    with pytest.raises(TypingError) as info:
        njit(ns["f"])(CAI(a))
    assert "would dereference device memory" in str(info.value)


_NOT_AN_OBJECT = "DeviceArray(float64, 1d, C) cannot be returned to Python or given to Python code"


@pytest.mark.parametrize("body", ["return x", "return x[1:]"])
def test_device_array_never_becomes_a_python_object(body):
    # Compiled code holds no reference to the producer, which owns the
    # memory: returning the array is refused with the reason (before:
    # "cannot convert native DeviceArray(...) to Python object").
    ns = {}
    exec("def f(x):\n    %s\n" % body, ns)
    with pytest.raises(TypeError) as info:
        njit(ns["f"])(CAI(np.zeros(4)))
    assert first_line(info.value).startswith(_NOT_AN_OBJECT)


def test_device_array_in_a_returned_tuple_is_refused_with_the_reason():
    # Numba's tuple boxing does not check its items: Python reports a
    # SystemError caused by the package's TypeError.
    @njit
    def f(x):
        return (x.size, x)

    with pytest.raises(SystemError) as info:
        f(CAI(np.zeros(4)))
    assert first_line(info.value.__cause__).startswith(_NOT_AN_OBJECT)


def test_printing_a_device_array_reports_the_reason(monkeypatch):
    # Numba's print() reports a value it cannot box as unraisable and goes on.
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))

    @njit
    def f(x):
        print(x)
        return x.size

    assert f(CAI(np.zeros(4))) == 4
    assert [first_line(e).startswith(_NOT_AN_OBJECT) for e in reported] == [True]


@pytest.mark.parametrize("body, attr", [("return x.T", "T"), ("x.copy_to_host()", "copy_to_host"),
                                        ("return x.sum()", "sum")])
def test_other_attributes_are_refused_with_what_works(body, attr):
    ns = {}
    exec("def f(x):\n    %s\n" % body, ns)
    with pytest.raises(TypingError) as info:
        njit(ns["f"])(CAI(np.zeros(4)))
    assert first_line(info.value) == (
        "DeviceArray(float64, 1d, C) has no attribute %r in compiled code: only shape, "
        "strides, size, ndim, dtype, itemsize, nbytes, len() and slicing (views) work on the host; "
        "pass the array to a kernel for anything else" % attr)


def test_hasattr_getattr_str_and_user_methods_still_work_on_device_arrays():
    # The refusal of other attributes leads Numba's "Unknown attribute"; it
    # is not raised from a template, where it would break hasattr() and
    # hide the user's own overload_method.
    from numba.extending import overload_method

    @overload_method(DeviceArray, "rows_for_test", target="cpu")
    def _rows(a):
        return lambda a: a.shape[0]

    x = CAI(np.zeros(5, np.float32))
    assert njit(lambda x: hasattr(x, "foo"))(x) is False
    assert njit(lambda x: getattr(x, "foo", -1))(x) == -1
    assert njit(lambda x: str(x))(x).startswith("<object type:DeviceArray(float32, 1d, C)")
    assert njit(lambda x: x.rows_for_test())(x) == 5


def test_a_users_failing_operator_overload_is_not_hidden_by_the_refusal():
    # The package's sentence leads only when every candidate that raised
    # raised one of the package's refusals.
    import operator

    from numba.extending import overload

    @overload(operator.lshift)
    def _lshift(a, b):
        if isinstance(a, DeviceArray) and isinstance(b, nt.Integer):
            return lambda a, b: a.shape[0] + "oops"

    with pytest.raises(TypingError) as info:
        njit(lambda x: x << 1)(CAI(np.zeros(4)))
    assert "would dereference device memory" not in first_line(info.value)
    assert "oops" in str(info.value)


@pytest.mark.parametrize("body, what", [
    ("lst.append(lst[0])", ".append()"), ("lst.pop()", ".pop()"),
    ("lst[0] = lst[1]", "changing items"), ("lst.reverse()", ".reverse()"),
])
def test_changing_a_list_of_device_arrays_passed_in_is_refused(body, what):
    # Numba writes a changed list argument back by boxing its items, and
    # stores a failed boxing's NULL into the caller's list (the interpreter
    # then crashed): refused when typing. Reading the list still works.
    items = [CAI(np.zeros(4)), CAI(np.zeros(4))]
    ns = {}
    exec("def f(lst):\n    %s\n    return len(lst)\n" % body, ns)
    with pytest.raises(TypingError) as info:
        njit(ns["f"])(items)
    assert first_line(info.value).startswith(what + " of a list of device arrays passed in")
    assert njit(lambda lst: lst[1].size + len(lst))(items) == 6
    assert all(isinstance(v, CAI) for v in items)


def test_len_is_the_first_extent(fake_driver):
    @njit
    def lengths(x):
        return len(x), len(x[1:]), len(x[0])

    assert lengths(CAI(np.zeros((5, 3)))) == (5, 4, 3)


@pytest.mark.parametrize("body, what", [
    ("return x + 1", "add on DeviceArray(float64, 1d, C), int64"),
    ("return -x", "neg on DeviceArray(float64, 1d, C)"),
    ("return x == x", "eq on DeviceArray(float64, 1d, C), DeviceArray(float64, 1d, C)"),
    ("x += 1.0", "iadd on DeviceArray(float64, 1d, C), float64"),
    ("return 1.0 in x", "contains on DeviceArray(float64, 1d, C), float64"),
    ("for v in x:\n        pass", "iterating over DeviceArray(float64, 1d, C)"),
])
def test_operators_and_iteration_are_refused_with_the_reason(body, what):
    ns = {}
    exec("def f(x):\n    %s\n" % body, ns)
    with pytest.raises(TypingError) as info:
        njit(ns["f"])(CAI(np.zeros(4)))
    assert first_line(info.value).startswith(
        what + ": reading or writing elements of a device array on the host would "
        "dereference device memory")


def test_host_numpy_operations_are_refused_not_run():
    @njit
    def f(x):
        return np.sum(x)

    with pytest.raises(TypingError):
        f(CAI(np.zeros(4)))


def _synced(fake):
    return [c[1] for c in fake.calls if c[0] == "cuStreamSynchronize"]


def test_producer_stream_synchronised_per_cai_v3(fake_driver):
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a, stream=0x1234), CAI(a, stream=None), 0)
    launch_scale(CAI(a, version=2), CAI(a, stream=2), 0)
    assert _synced(fake_driver) == [0x1234, 2]  # no entry (v2) or None: nothing to wait for


def test_one_producer_stream_is_synchronised_once_per_call(fake_driver):
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a, stream=0x5), CAI(a, stream=0x5), 0)
    assert _synced(fake_driver) == [0x5]
    launch_scale(CAI(a, stream=0x5), CAI(a, stream=7), 0)
    launch_scale(CAI(a, stream=0x5), CAI(a, stream=0x5), 0)  # a new call waits again
    assert _synced(fake_driver) == [0x5, 0x5, 7, 0x5]


@pytest.mark.parametrize("producer, launch", [(0x99, 0x99), (1, 0), (1, 1), (2, 2)])
def test_no_wait_when_the_launch_is_on_the_producer_stream(fake_driver, producer, launch):
    # The stream orders the work; 0 (the default stream) and 1 (CAI v3's
    # legacy default stream) are one stream.
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a, stream=producer), CAI(a, stream=producer), launch)
    assert _synced(fake_driver) == []
    assert fake_driver.launches[0].stream == launch


@pytest.mark.parametrize("producer, launch",
                         [(0x99, 0x98), (1, 0x98), (0x99, 0), (2, 0), (0x99, 1)])
def test_wait_when_the_launch_is_on_another_stream(fake_driver, producer, launch):
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a, stream=producer), CAI(a), launch)
    assert _synced(fake_driver) == [producer]
    assert [x.stream for x in fake_driver.launches] == [launch]


def test_a_function_waits_once_for_a_producer_stream_across_its_launches(fake_driver):
    @njit
    def loop(x, out, n, stream):
        for _ in range(n):
            scale[1, 32, stream](2.0, x, out)
        scale[1, 32, 0x99](2.0, x[1:], out[1:])  # a view keeps its producer
        return n

    a = np.zeros(4, np.float32)
    loop(CAI(a, stream=0x99), CAI(a), 5, 0x42)
    assert _synced(fake_driver) == [0x99]
    assert len(fake_driver.launches) == 6
    loop(CAI(a, stream=0x99), CAI(a), 2, 0x99)  # on the producer's stream
    assert _synced(fake_driver) == [0x99]


def test_view_launched_on_another_stream_waits_for_its_producer(fake_driver):
    @njit
    def f(x, out):
        scale[1, 32, 0x42](2.0, x[1:][::2], out[:2])

    a = np.zeros(8, np.float32)
    f(CAI(a, stream=0x99), CAI(a))
    assert _synced(fake_driver) == [0x99]


def test_arrays_that_are_not_launched_are_not_waited_for(fake_driver):
    @njit
    def size(x):
        return x.size

    assert size(CAI(np.zeros(4, np.float32), stream=0x99)) == 4
    assert _synced(fake_driver) == []


def test_objmode_unboxing_in_a_loop_waits_each_time(fake_driver):
    # Python ran between two launches: work may have been queued since.
    ty = DeviceArray(nt.float32, 1, "C")
    box = [CAI(np.zeros(4, np.float32), stream=0x77)]

    @njit
    def f(n):
        total = 0
        for _ in range(n):
            with numba.objmode(x=ty):
                x = box[0]
            scale[1, 32, 0x42](2.0, x, x)
            total += x.size
        return total

    assert f(3) == 12
    assert _synced(fake_driver) == [0x77] * 3
    assert len(fake_driver.launches) == 3


def test_sync_setting_is_honoured(monkeypatch, fake_driver):
    from numba.cuda import config as cuda_config

    monkeypatch.setattr(cuda_config, "CUDA_ARRAY_INTERFACE_SYNC", False)
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a, stream=0x1234), CAI(a, stream=0x1234), 0)
    assert _synced(fake_driver) == []
    assert len(fake_driver.launches) == 1


def test_dlpack_producer_is_read_from_its_capsule(fake_driver):
    x = rng.standard_normal((3, 4)).astype(np.float32)
    out = np.zeros((3, 4), np.float32)
    px, pout = DLPackOnDevice(x), DLPackOnDevice(out)
    assert numba.typeof(px) == DeviceArray(nt.float32, 2, "C")
    launch_2d(px, pout)
    assert array_params(fake_driver.launches[0], 0)[:9] == expected_params(x)
    assert px.streams[-1] == 1  # no consumer named: the legacy default stream


def test_on_stream_names_the_consumer_stream_for_dlpack(fake_driver):
    x = np.zeros(4, np.float32)
    px = DLPackOnDevice(x)
    launch_scale(ncl.on_stream(px, 0xABC), ncl.on_stream(DLPackOnDevice(x), 0xABC), 0xABC)
    assert px.streams[-1] == 0xABC
    assert fake_driver.launches[0].stream == 0xABC


def test_readonly_dlpack_gives_readonly_type():
    a = np.zeros(4, np.float32)
    a.flags.writeable = False
    ty = numba.typeof(DLPackOnDevice(a))
    assert ty == DeviceArray(nt.float32, 1, "C", readonly=True)


@pytest.mark.parametrize("device", [(1, 0), (1, -1)])  # kDLCPU; its id is not checked
def test_dlpack_on_the_host_is_not_a_device_array(device):
    class HostDLPack(DLPackOnDevice):
        def __dlpack_device__(self):
            return device

    @njit
    def f(x):
        return 0

    with pytest.raises(TypingError) as info:
        f(HostDLPack(np.zeros(4)))
    assert first_line(info.value) == (
        "f(): argument 1 'x': its DLPack device %r is not a CUDA device (device types "
        "(2, 3, 13): CUDA, CUDA host, CUDA managed memory)" % (device,))


@pytest.mark.parametrize("make", [lambda h: CupyLikeStream(h), lambda h: ProtocolStream(h), int])
def test_stream_objects(fake_driver, make):
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a), CAI(a), make(0x5150))
    assert fake_driver.launches[0].stream == 0x5150


def test_carray_path_keeps_working(fake_driver):
    @njit
    def f(p):
        x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
        scale[1, 32](2.0, x, x)

    f(0x10000)
    assert struct.unpack("<q", fake_driver.launches[0].params[5])[0] == 0x10000


def test_device_array_inside_a_tuple(fake_driver):
    @cuda.jit
    def pair(t):
        t[1][0] = t[0][0]

    @njit
    def f(x, y):
        pair[1, 1]((x, y))

    a, b = np.zeros(4, np.float32), np.zeros(4, np.float32)
    f(CAI(a), CAI(b))
    params = [struct.unpack("<q", p)[0] for p in fake_driver.launches[0].params]
    assert params == expected_params(a) + expected_params(b)


def test_producer_stream_synchronised_through_the_driver(fake_driver):
    a = np.zeros(4, np.float32)
    launch_scale(CAI(a, stream=0x1234), CAI(a, stream=None), 0)
    syncs = [c for c in fake_driver.calls if c[0] == "cuStreamSynchronize"]
    assert syncs == [("cuStreamSynchronize", 0x1234)]
    assert len(fake_driver.launches) == 1


def test_failed_producer_stream_sync_is_an_error(fake_driver):
    fake_driver.statuses["cuStreamSynchronize"] = 400
    a = np.zeros(4, np.float32)
    with pytest.raises(ncl.CudaLaunchError, match="CUDA_ERROR_INVALID_HANDLE") as info:
        launch_scale(CAI(a, stream=0x1234), CAI(a), 0)
    assert "producer stream of parameter 'x' (argument 2)" in str(info.value)
    assert fake_driver.launches == []


def test_failed_producer_stream_sync_is_a_status(fake_driver):
    @njit
    def f(x, out):
        return scale[1, 32, 0x42].launch_status(2.0, x, out)

    fake_driver.statuses["cuStreamSynchronize"] = 400
    a = np.zeros(4, np.float32)
    assert f(CAI(a, stream=0x1234), CAI(a)) == 400
    assert fake_driver.launches == []


def test_producer_refusing_its_interface_is_a_typing_error_not_a_crash():
    class Refusing:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("can't export a tensor that requires grad")

    @njit
    def f(x):
        return 0

    with pytest.raises(TypingError):
        f(Refusing())


@pytest.mark.parametrize("producer", [0x99, 1])
def test_a_launch_recorded_in_a_graph_and_its_producer_stream(fake_driver, producer):
    # 0x99 is waited for during the capture, in the relaxed capture mode
    # (the thread-local one refuses synchronisations), the thread's mode
    # restored after; the legacy stream (1) may not be used during a
    # capture: the launch after it waits for it.
    from numba_cuda_launch import graphs

    @njit
    def record(x, out, stream):
        graphs.begin_capture(stream)
        scale[1, 32, stream](2.0, x, out)
        graph = graphs.end_capture(stream)
        graph.destroy()
        scale[1, 32, stream](2.0, x, out)

    a = np.zeros(4, np.float32)
    record(CAI(a, stream=producer), CAI(a), 0x42)
    assert _synced(fake_driver) == [producer]
    modes = [c[1] for c in fake_driver.calls if c[0] == "cuThreadExchangeStreamCaptureMode"]
    assert modes == ([graphs.CAPTURE_RELAXED, 0] if producer != 1 else [])
    assert len(fake_driver.graphs) == 1
    assert [x.stream for x in fake_driver.launches] == [0x42]


class RawCAI:
    """An object whose ``__cuda_array_interface__`` is exactly *cai*."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def _cai_dict(a, **changes):
    d = dict(shape=a.shape, strides=a.strides, typestr=a.dtype.str,
             data=(a.ctypes.data, False), version=3, stream=None)
    d.update(changes)
    return {k: v for k, v in d.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize("changes, says", [
    (dict(strides=(4, 4)), "'strides' (4, 4) do not match 'shape' (8,)"),
    (dict(shape=(-1,), strides=None), "'shape' (-1,) has a negative extent"),
    (dict(shape=(8.0,), strides=None), "'shape' entries must be an integer"),
    (dict(typestr="zz"), "'typestr' 'zz' is not a NumPy dtype"),
    (dict(typestr="|V8"), "has no Numba type"),
    (dict(version=1), "version 1: versions 2 and 3 are supported"),
    (dict(version=_DROP), "no 'version' entry"),
    (dict(data=None), "'data' must be (pointer, read_only)"),
    (dict(data=("0x10", False)), "the 'data' pointer must be an integer"),
    (dict(shape=(2 ** 40, 2 ** 40), strides=None), "is larger than the address space"),
    (dict(shape=(0, 2 ** 70), strides=None), "is larger than the address space"),
    (dict(strides=(2 ** 64,)), "'strides' (18446744073709551616,) are larger than"),
    (dict(shape=(0, 2 ** 62), strides=None), "is larger than the address space"),
    (dict(typestr="|O8"), "'typestr' '|O8' is Python objects, which device memory cannot hold"),
    (dict(shape=(2 ** 40,), strides=(2 ** 40,)), "'shape' (1099511627776,) with 'strides' "
                                                 "(1099511627776,) from pointer"),
    (dict(data=(16, False), strides=(-4,)), "from pointer 0x10 addresses bytes -12 to 19, "
                                            "beyond 64-bit addresses"),
    # (before: launched; a kernel reading a float32 at an odd address faults)
    (dict(shape=(1, 1, 1, 3), strides=None, data=(0x1002, False)),  # a layout not seen
     "the data pointer 0x1002 is not a multiple of 4, the alignment of its items (a kernel "
     "reading one there would fault)"),
])
def test_a_malformed_interface_is_a_typing_error_naming_the_argument(changes, says):
    a = np.zeros(8, np.float32)

    @njit
    def f(x, out):
        scale[1, 32](2.0, x, out)

    with pytest.raises(TypingError) as info:
        f(RawCAI(_cai_dict(a, **changes)), CAI(a))
    first = first_line(info.value)
    assert first.startswith("f(): argument 1 'x': ")
    assert says in first


def test_an_interface_that_raises_is_a_typing_error_naming_the_argument():
    class Raising:
        @property
        def __cuda_array_interface__(self):
            raise RuntimeError("no export today")

    @njit
    def f(a, x):
        return x.size

    with pytest.raises(TypingError) as info:
        f(1, Raising())
    assert first_line(info.value) == (
        "f(): argument 2 'x': reading its __cuda_array_interface__ raised RuntimeError: "
        "no export today")


def test_an_interface_property_raising_attribute_error_is_explained():
    # getattr() with a default would read it as "no interface" (then Numba's
    # "non-precise type pyobject").
    class Broken:
        @property
        def __cuda_array_interface__(self):
            return self.missing

    @njit
    def f(x):
        return x.size

    with pytest.raises(TypingError) as info:
        f(Broken())
    assert first_line(info.value) == (
        "f(): argument 1 'x': reading its __cuda_array_interface__ raised AttributeError: "
        "'Broken' object has no attribute 'missing'")


@pytest.mark.parametrize("stream", [-5, 1.5, "x", True, 2 ** 64 - 1])
def test_a_stream_entry_that_is_no_handle_is_refused(fake_driver, stream):
    a = np.zeros(8, np.float32)
    launch_scale(CAI(a), CAI(a), 0)  # compiled for these types
    with pytest.raises((TypeError, TypingError), match="'stream' must be .*not %s"
                       % re.escape(repr(stream))):
        launch_scale(RawCAI(_cai_dict(a, stream=stream)), CAI(a), 0)
    assert len(fake_driver.launches) == 1


def test_stream_0_is_the_legacy_default_stream_as_numba_cuda_reads_it(fake_driver):
    a = np.zeros(8, np.float32)
    launch_scale(RawCAI(_cai_dict(a, stream=0)), CAI(a), 0)  # the same stream: no wait
    launch_scale(RawCAI(_cai_dict(a, stream=0)), CAI(a), 0x42)
    assert _synced(fake_driver) == [1]


def test_a_cuda_stream_protocol_returning_no_handle_is_refused(fake_driver):
    class Garbage(ProtocolStream):
        def __cuda_stream__(self):
            return "x"

    a = np.zeros(4, np.float32)
    launch_scale(CAI(a), CAI(a), ProtocolStream(0x5150))
    with pytest.raises(TypeError, match=r"__cuda_stream__\(\) must return \(version, handle\)"):
        launch_scale(CAI(a), CAI(a), Garbage(0x5150))
    assert [x.stream for x in fake_driver.launches] == [0x5150]


class NotCallableProtocol:
    __cuda_stream__ = 5


@pytest.mark.parametrize("stream, message", [
    (CupyLikeStream(2.5), "Stream.ptr must be an integer stream handle, not 2.5"),
    (CupyLikeStream(None), "Stream.ptr must be an integer stream handle, not None"),
    (ProtocolStream(2 ** 64), "must be a stream handle between 0 and 2**64-1"),
    (ProtocolStream(-3), "must be a stream handle between 0 and 2**64-1"),
    (ProtocolStream(1.5), "must be an integer stream handle, not 1.5"),
    (NotCallableProtocol(), "__cuda_stream__ must be a method returning (version, handle)"),
])
def test_stream_objects_with_unusable_handles_are_refused(fake_driver, stream, message):
    # Never truncated into another stream (2.5 was launched on stream 2).
    a = np.zeros(4, np.float32)
    with pytest.raises(TypeError) as info:
        launch_scale(CAI(a), CAI(a), stream)
    assert message in str(info.value)
    assert fake_driver.launches == []


@pytest.mark.parametrize("stream", [2.7, "5", True, np.float32(3.7), CupyLikeStream(2.5)])
def test_python_forms_refuse_streams_that_are_not_handles(fake_driver, stream):
    # The Python forms of the sync and event functions and on_stream take
    # what compiled code takes: a float or a string is not truncated.
    with pytest.raises(TypeError, match="stream handle"):
        ncl.stream_synchronize(stream)
    with pytest.raises(TypeError, match="stream handle"):
        ncl.stream_query(stream)
    with pytest.raises(TypeError, match="stream handle"):
        njit(lambda: ncl.event())().record(stream)
    with pytest.raises(TypeError, match="stream handle"):
        ncl.on_stream(DLPackOnDevice(np.zeros(4)), stream)._consumer_stream()
    assert [c for c in fake_driver.calls if c[0] in ("cuStreamSynchronize", "cuStreamQuery",
                                                      "cuEventRecord")] == []


def test_python_forms_refuse_integers_beyond_64_bits(fake_driver):
    with pytest.raises(TypeError, match="between 0 and 2\\*\\*64-1"):
        ncl.stream_synchronize(2 ** 64)


def test_python_forms_take_integer_handles(fake_driver):
    ncl.stream_synchronize(np.int64(9))
    ncl.stream_synchronize(CupyLikeStream(11))
    assert [c[1] for c in fake_driver.calls if c[0] == "cuStreamSynchronize"] == [9, 11]


@pytest.mark.parametrize("pointer", [-16, 2 ** 63, 2 ** 64 + 16])
def test_a_pointer_outside_the_address_space_is_refused(fake_driver, pointer):
    # The pointer is read at each call (it is not part of the type): a
    # TypeError saying what is wrong, never a truncated or wrapped address.
    a = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match=r"the 'data' pointer must be between 0 and 2\*\*63-1"):
        launch_scale(RawCAI(_cai_dict(a, data=(pointer, False))), CAI(a), 0)
    assert fake_driver.launches == []


def test_an_interface_changing_its_dtype_between_typing_and_reading_is_refused(fake_driver):
    # The dispatcher types the object, then the call reads it again: data of
    # another item size never reaches the kernel compiled for the type.
    small, big = np.zeros(8, np.float32), np.zeros(16, np.float64)
    reads = []

    class Flipping:
        @property
        def __cuda_array_interface__(self):
            reads.append(1)
            return _cai_dict(small if len(reads) % 2 else big, strides=None)

    @njit
    def f(x):
        return scale[1, 32].launch_status(2.0, x, x)

    with pytest.raises(TypeError, match="interface changed between typing and reading it"):
        f(Flipping())
    assert fake_driver.launches == []


@pytest.mark.parametrize("inner, says", [
    (np.zeros(3), "on_stream() wraps a device array; it was given a NumPy array (host memory)"),
    (5, "on_stream() wraps a device array (an object with __cuda_array_interface__ or "
        "__dlpack__); it was given int"),
])
def test_on_stream_of_something_else_names_the_argument(inner, says):
    @njit
    def size(x):
        return x.size

    with pytest.raises(TypingError) as info:
        size(ncl.on_stream(inner, 0))
    assert first_line(info.value) == "size(): argument 1 'x': " + says


_BUFFER = np.zeros(16, np.float32)


@pytest.mark.parametrize("changes, says", [
    (dict(typestr="<i4"), "(typed DeviceArray(float32, 1d, C)): its dtype is now int32; it is "
                          "not launched"),
    (dict(data=(_BUFFER.ctypes.data, True)), "(typed DeviceArray(float32, 1d, C)): its memory is "
                                             "now read-only; it is not launched"),
    (dict(strides=(8,)), "its item size or strides are no longer those of "
                         "DeviceArray(float32, 1d, C); it is not launched"),
])
def test_an_interface_read_again_must_say_what_its_type_says(fake_driver, changes, says):
    # An object typed, then read again by the call's unboxing (the compiled
    # entry point, called directly, is that second reading).
    a = _BUFFER[:8]

    @njit
    def f(x):
        return scale[1, 32].launch_status(2.0, x, x)

    f(RawCAI(_cai_dict(a)))
    with pytest.raises(TypeError) as info:
        f.overloads[f.signatures[0]].entry_point(RawCAI(_cai_dict(a, **changes)))
    assert says in str(info.value)
    assert len(fake_driver.launches) == 1


def test_an_interface_read_again_must_lie_in_64_bit_addresses(fake_driver):
    a = _BUFFER[::2]

    @njit
    def f(x):
        return scale[1, 32].launch_status(2.0, x, x)

    f(RawCAI(_cai_dict(a)))  # an 'A' layout: any strides fit the type
    with pytest.raises(TypeError) as info:
        f.overloads[f.signatures[0]].entry_point(RawCAI(_cai_dict(a, strides=(2 ** 62,))))
    assert "'strides' (4611686018427387904,) from pointer" in str(info.value)
    assert "beyond 64-bit addresses" in str(info.value)
    assert len(fake_driver.launches) == 1


@pytest.mark.parametrize("reverse, pointer, says", [
    (False, 2 ** 63, "the 'data' pointer must be between 0 and 2**63-1"),
    (True, 8, "from pointer 0x8 addresses bytes -20 to 11, beyond 64-bit addresses"),
    (False, 0x1001, "the data pointer 0x1001 is not a multiple of 4"),
])
def test_an_interface_read_again_with_a_layout_seen_before_checks_its_pointer(
        fake_driver, reverse, pointer, says):
    # A layout (dtype, shape, strides) is checked once; the pointer of each
    # reading every time.
    a = _BUFFER[7::-1] if reverse else _BUFFER[:8]

    @njit
    def f(x):
        return scale[1, 32].launch_status(2.0, x, x)

    f(RawCAI(_cai_dict(a)))
    f(RawCAI(_cai_dict(a, data=(a.ctypes.data + 4, False))))
    with pytest.raises(TypeError) as info:
        f.overloads[f.signatures[0]].entry_point(RawCAI(_cai_dict(a, data=(pointer, False))))
    assert says in str(info.value)
    assert len(fake_driver.launches) == 2


def test_on_stream_of_an_interface_is_read_again_at_the_call(fake_driver):
    # on_stream of a CUDA Array Interface producer (JAX's arrays have both
    # protocols) is typed and read through the interface, as the array is.
    a = _BUFFER[:8]

    @njit
    def f(x):
        return scale[1, 32].launch_status(2.0, x, x)

    f(ncl.on_stream(RawCAI(_cai_dict(a)), 0))
    assert f.signatures[0][0] == DeviceArray(nt.float32, 1, "C")
    with pytest.raises(TypeError, match="its dtype is now int32"):
        f.overloads[f.signatures[0]].entry_point(
            ncl.on_stream(RawCAI(_cai_dict(a, typestr="<i4")), 0))
    assert len(fake_driver.launches) == 1
