"""DLPack producers as arguments of compiled launchers, on the CPU: capsules
built with ctypes over host memory (a managed tensor whose deleter records
that it ran), launches recorded by the recording driver. The protocol's
rules (capsule names, versions, the consumer's ownership of the tensor,
streams) and every malformed tensor refused with a message naming the
argument."""

import ctypes
import struct
import weakref

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.core.errors import TypingError

import numba_cuda_launch as ncl
from support.messages import first_line

rng = np.random.default_rng()
_vp = ctypes.c_void_p


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", _vp), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, _vp)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", _vp), ("deleter", DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32), ("manager_ctx", _vp),
                ("deleter", DELETER), ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


def _api(name, restype, *argtypes):
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_new = _api("PyCapsule_New", ctypes.py_object, _vp, ctypes.c_char_p, _vp)
_raw_name = _api("PyCapsule_GetName", ctypes.c_char_p, _vp)
_raw_pointer = _api("PyCapsule_GetPointer", _vp, _vp, ctypes.c_char_p)
capsule_name = _api("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_NAMES = {}  # name -> bytes the capsules point to (kept for the process)


@ctypes.CFUNCTYPE(None, _vp)
def _capsule_destructor(capsule):
    # The producer's side of the protocol: a capsule nobody consumed frees
    # its tensor; a consumed (renamed) one leaves that to the consumer.
    name = _raw_name(capsule)
    if name == b"dltensor":
        DLManagedTensor.from_address(_raw_pointer(capsule, name)).deleter(
            _raw_pointer(capsule, name))
    elif name == b"dltensor_versioned":
        DLManagedTensorVersioned.from_address(_raw_pointer(capsule, name)).deleter(
            _raw_pointer(capsule, name))


_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


class Producer:
    """A DLPack producer over host memory that says it is on a CUDA device.
    Each ``__dlpack__`` exports a fresh copy of *a* that only its capsule
    owns: the managed tensor's deleter frees it (:attr:`live` forgets it)
    and records its data address in :attr:`deleted`. Keyword arguments
    spoil the tensor (``dl_dtype=(code, bits, lanes)``, ``ndim``,
    ``shape``, ``null_shape``, ``major``, ``name``, ``byte_offset``) or the protocol
    (``result``: what ``__dlpack__`` returns; ``device``)."""

    def __init__(self, a, versioned=True, readonly=False, keep_capsules=False, **spoil):
        self.a, self.versioned, self.readonly, self.spoil = a, versioned, readonly, spoil
        self.device = spoil.pop("device", (2, 0))
        self.streams, self.live, self.deleted = [], {}, []
        self.capsules = [] if keep_capsules else None
        self._deleter = DELETER(self._delete)

    def _delete(self, address):
        entry = self.live.pop(address, None)  # None: freed twice
        self.deleted.append(None if entry is None else entry[-1].ctypes.data)

    def __dlpack_device__(self):
        return self.device

    def __dlpack__(self, stream=None, max_version=None):
        self.streams.append(stream)
        if "result" in self.spoil:
            return self.spoil["result"]
        buf = self.a.copy()
        dims = self.spoil.get("shape", buf.shape)
        shape = None if self.spoil.get("null_shape") else \
            (ctypes.c_int64 * max(len(dims), 1))(*dims)
        strides = (ctypes.c_int64 * max(len(dims), 1))(*(s // buf.itemsize for s in buf.strides))
        code, bits, lanes = self.spoil.get(
            "dl_dtype", (_DL_CODES[buf.dtype.kind], 8 * buf.itemsize, 1))
        tensor = DLTensor(buf.ctypes.data, DLDevice(2, 0), self.spoil.get("ndim", buf.ndim),
                          DLDataType(code, bits, lanes), shape, strides,
                          self.spoil.get("byte_offset", 0))
        if self.versioned:
            managed = DLManagedTensorVersioned(self.spoil.get("major", 1), 0, None, self._deleter,
                                               int(self.readonly), tensor)
        else:
            managed = DLManagedTensor(tensor, None, self._deleter)
        address = ctypes.addressof(managed)
        self.live[address] = (managed, shape, strides, buf)
        name = self.spoil.get("name", b"dltensor_versioned" if self.versioned else b"dltensor")
        capsule = _capsule_new(address, _NAMES.setdefault(name, name),
                               ctypes.cast(_capsule_destructor, _vp))
        if self.capsules is not None:
            self.capsules.append(capsule)
        return capsule

    def live_buffers(self):
        return {entry[-1].ctypes.data for entry in self.live.values()}


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = 2 * x[i]


@cuda.jit
def add(x, y):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += y[i]


@njit
def launch_double(x):
    double[1, 32](x)


@njit
def launch_pair(pair):
    add[1, 32](pair[0], pair[1])


def data_param(launch, index=0):
    """The data pointer of the array whose parameters start at *index*."""
    return struct.unpack("<q", launch.params[index + 4])[0]


def watch_launches(fake_driver, producer):
    """Record, at each launch the driver receives, which of *producer*'s
    buffers are still alive."""
    seen, record = [], fake_driver._record

    def recording(*args):
        seen.append(producer.live_buffers())
        return record(*args)

    fake_driver._record = recording
    return seen


@pytest.mark.parametrize("versioned", [True, False])
def test_the_launched_tensor_is_alive_at_the_launch_and_freed_after_the_call(
        fake_driver, versioned):
    p = Producer(rng.standard_normal(16).astype(np.float32), versioned=versioned)
    seen = watch_launches(fake_driver, p)
    launch_double(p)
    launched = data_param(fake_driver.launches[0])
    assert launched in seen[0]  # not freed before the driver got it
    assert p.live == {}  # every exported tensor freed once the call returned ...
    assert len(p.deleted) == len(p.streams) and p.deleted[-1] == launched  # ... once, last


def test_tensors_in_a_tuple_are_alive_at_the_launch_and_freed_after_the_call(fake_driver):
    x, y = (Producer(rng.standard_normal(8).astype(np.float32)) for _ in range(2))
    seen_x, seen_y = [], []
    record = fake_driver._record

    def recording(*args):
        seen_x.append(x.live_buffers())
        seen_y.append(y.live_buffers())
        return record(*args)

    fake_driver._record = recording
    launch_pair((x, y))
    launch = fake_driver.launches[0]
    assert data_param(launch, 0) in seen_x[0]
    assert data_param(launch, 7) in seen_y[0]  # 5 + 2 * ndim parameters per array
    assert x.live == {} and y.live == {}


@pytest.mark.parametrize("versioned, used", [(True, b"used_dltensor_versioned"),
                                             (False, b"used_dltensor")])
def test_a_consumed_capsule_is_renamed_and_its_tensor_freed_once(fake_driver, versioned, used):
    p = Producer(np.zeros(4, np.float32), versioned=versioned, keep_capsules=True)
    launch_double(p)
    assert [capsule_name(c) for c in p.capsules] == [used] * len(p.capsules)
    deleted = len(p.deleted)
    assert deleted == len(p.capsules)
    del p.capsules[:]  # the capsules' destructors must not free the tensors again
    assert len(p.deleted) == deleted


def test_a_refused_capsule_is_left_to_its_destructor(fake_driver):
    # A tensor of DLPack 2.x may be laid out otherwise: refused unread and
    # not consumed, so its capsule frees it.
    p = Producer(np.zeros(4, np.float32), major=2, keep_capsules=True)
    with pytest.raises(TypingError):
        launch_double(p)
    assert all(capsule_name(c) == b"dltensor_versioned" for c in p.capsules)
    del p.capsules[:]
    assert p.live == {}
    assert fake_driver.launches == []


@pytest.mark.parametrize("stream, given", [(0, 1), (None, 1), (2, 2), (0x5A5A, 0x5A5A)])
def test_the_producer_is_given_a_stream_the_protocol_allows(fake_driver, stream, given):
    p = Producer(np.zeros(4, np.float32))
    launch_double(ncl.on_stream(p, stream))
    assert p.streams and set(p.streams) == {given}


def test_the_read_only_flag_types_a_read_only_array():
    ty = numba.typeof(Producer(np.zeros(3, np.float32), readonly=True))
    assert ty.readonly and ty.dtype == numba.float32


def test_the_byte_offset_is_added_to_the_data_pointer(fake_driver):
    p = Producer(np.zeros(6, np.float32), shape=(4,), byte_offset=8)
    seen = watch_launches(fake_driver, p)
    launch_double(p)
    launched = data_param(fake_driver.launches[0])
    assert launched - 8 in seen[0]
    assert struct.unpack("<q", fake_driver.launches[0].params[5])[0] == 4


@pytest.mark.parametrize("spoil, says", [
    (dict(name=b"used_dltensor"), "a capsule named 'used_dltensor' (already consumed); "
                                  "'dltensor' or 'dltensor_versioned' was expected"),
    (dict(name=b"tensor"), "a capsule named 'tensor'; 'dltensor' or"),
    (dict(result=None), "__dlpack__() returned NoneType, not a DLPack capsule"),
    (dict(major=2), "the capsule is of DLPack version 2.0; version 1.x is supported"),
    (dict(ndim=-1), "ndim is -1"),
    (dict(shape=(-4,)), "shape (-4,) has a negative extent"),
    (dict(dl_dtype=(2, 12, 1)), "dtype (code 2, 12 bits, 1 lanes) has no NumPy equivalent"),
    (dict(dl_dtype=(2, 32, 4)), "dtype (code 2, 32 bits, 4 lanes) has no NumPy equivalent"),
    (dict(dl_dtype=(1, 4, 1)), "dtype (code 1, 4 bits, 1 lanes) has no NumPy equivalent"),
    (dict(shape=(2 ** 62,)), "'shape' (4611686018427387904,) of 4-byte items is larger than "
                             "the address space"),
    (dict(byte_offset=2 ** 63), "the 'data' pointer must be between 0 and 2**63-1"),
    # (before: launched; a kernel reading an item there faults)
    (dict(byte_offset=2), "is not a multiple of 4, the alignment of its items (a kernel "
                          "reading one there would fault)"),
    (dict(null_shape=True), "shape is a NULL pointer (ndim 1)"),
    (dict(device=5), "__dlpack_device__() returned 5; a (device_type, device_id) pair of "
                     "integers was expected"),
    (dict(device=("cuda", 0)), "__dlpack_device__() entries must be an integer, not 'cuda'"),
    (dict(device=(2, -1)), "__dlpack_device__() returned (2, -1); its device_id must be a "
                           "device ordinal, 0 to 2**31-1"),
    (dict(device=[2, 2 ** 31]), "__dlpack_device__() returned (2, 2147483648); its device_id "
                                "must be a device ordinal, 0 to 2**31-1"),
])
def test_a_malformed_tensor_is_a_typing_error_naming_the_argument(fake_driver, spoil, says):
    with pytest.raises(TypingError) as info:
        launch_double(Producer(np.zeros(4, np.float32), **spoil))
    first = first_line(info.value)
    assert first.startswith("launch_double(): argument 1 'x': Producer is not a usable device "
                            "array: ")
    assert says in first
    assert fake_driver.launches == []


class _Failing:
    """A producer whose __dlpack__ or __dlpack_device__ raises."""

    def __init__(self, which):
        self.which = which

    def __dlpack_device__(self):
        if self.which == "device":
            raise RuntimeError("no device today")
        return (2, 0)

    def __dlpack__(self, stream=None, max_version=None):
        raise RuntimeError("no tensor today")


@pytest.mark.parametrize("which, says", [
    ("device", "_Failing is not a usable device array: DLPack: __dlpack_device__() raised "
               "RuntimeError: no device today"),
    ("tensor", "_Failing is not a usable device array: DLPack: __dlpack__(stream=1) raised "
               "RuntimeError: no tensor today"),
])
def test_a_producer_that_raises_is_named_with_its_error(fake_driver, which, says):
    # (before: the producer's message alone, without the method that raised)
    with pytest.raises(TypingError) as info:
        launch_double(_Failing(which))
    assert first_line(info.value) == "launch_double(): argument 1 'x': " + says


def test_dlpack_without_dlpack_device_says_what_is_missing(fake_driver):
    class HalfProducer:
        def __dlpack__(self, stream=None, max_version=None):
            raise AssertionError("not asked")

    # (before: Numba's "non-precise type pyobject" alone)
    with pytest.raises(TypingError) as info:
        launch_double(HalfProducer())
    assert first_line(info.value) == (
        "launch_double(): argument 1 'x': HalfProducer has __dlpack__ but no "
        "__dlpack_device__, which a DLPack producer also defines (it says which device the "
        "tensor is on)")


def test_a_tensor_whose_dtype_changed_after_typing_is_refused(fake_driver):
    p = Producer(np.zeros(4, np.float32))
    launch_double(p)  # compiled for float32 tensors
    p.spoil["dl_dtype"] = (0, 32, 1)  # int32 now, the same item size
    with pytest.raises(TypeError, match=r"typed DeviceArray\(float32, 1d, C\)\): its dtype is "
                                        r"now int32; it is not launched"):
        launch_double.overloads[launch_double.signatures[0]].entry_point(p)
    assert len(fake_driver.launches) == 1
    assert p.live == {}


_OBJMODE_PRODUCERS = []


def _objmode_producer():
    # Reached through a module function: Numba pickles what an objmode block
    # references (numba 0.62), and a producer's ctypes fields cannot be.
    return _OBJMODE_PRODUCERS[0]


def test_a_tensor_leaving_an_objmode_block_is_refused(fake_driver):
    # Numba cleans up what objmode hands back right after reading it: the
    # tensor would be deleted before the launch.
    p = Producer(np.zeros(4, np.float32))
    ty = numba.typeof(p)
    _OBJMODE_PRODUCERS[:] = [p]

    @njit
    def f():
        with numba.objmode(v=ty):
            v = _objmode_producer()
        double[1, 32](v)

    with pytest.raises(TypeError, match=r"a DLPack producer cannot leave an objmode block as "
                                        r"DeviceArray\(float32, 1d, C\)"):
        f()
    assert fake_driver.launches == []
    assert p.live == {}


# -- one export per call ------------------------------------------------------------------

def test_a_call_exports_its_tensor_once_and_frees_it_when_it_returns(fake_driver):
    # Typing reads the tensor and hands it to the call's unboxing: one
    # __dlpack__ per argument and call, the launched memory alive at the
    # launch and freed after it.
    p = Producer(rng.standard_normal(16).astype(np.float32))
    launch_double(p)  # compiled
    seen = watch_launches(fake_driver, p)
    for _ in range(3):
        exported = len(p.streams)
        launch_double(p)
        assert len(p.streams) == exported + 1
        assert data_param(fake_driver.launches[-1]) in seen[-1]
        assert p.live == {}


@njit
def launch_add(x, y):
    add[1, 32](x, y)


def test_one_producer_given_twice_is_alive_twice_and_freed(fake_driver):
    p = Producer(rng.standard_normal(8).astype(np.float32))
    launch_add(p, p)
    seen = watch_launches(fake_driver, p)
    launch_add(p, p)
    launch = fake_driver.launches[-1]
    assert {data_param(launch, 0), data_param(launch, 7)} <= seen[0]
    assert p.live == {}


@njit
def launch_double_with(x, n):
    double[1, n](x)


def test_a_call_failing_to_compile_frees_the_tensor_typing_read(fake_driver):
    p = Producer(np.zeros(4, np.float32))
    with pytest.raises(TypingError):
        launch_double_with(p, "32")  # a block size that is a string
    assert p.streams and p.live == {}
    assert fake_driver.launches == []


def test_tensors_of_calls_that_never_unboxed_them_are_bounded():
    # What typing kept for a call that failed before unboxing it (no
    # compilation to release it) stays for a while only: the newest few.
    from numba_cuda_launch.launch.devicearray.unbox import TYPED_FIELDS

    class Owner:
        pass

    owners, producers = [], []
    for _ in range(5 * TYPED_FIELDS._OWNED):
        producers.append(Producer(np.zeros(1, np.float32)))
        owners.append(weakref.ref(o := Owner()))
        assert TYPED_FIELDS.keep_owned(producers[-1], (0, 4, 1, 4, 0, o))
        del o
    alive = sum(r() is not None for r in owners)
    assert TYPED_FIELDS._OWNED <= alive <= 2 * TYPED_FIELDS._OWNED
    assert owners[-1]() is not None
    TYPED_FIELDS.release(producers)
    assert all(r() is None for r in owners)


def test_on_stream_gives_the_stream_it_names_at_each_call(fake_driver):
    p = Producer(np.zeros(4, np.float32))
    w = ncl.on_stream(p, 5)
    launch_double(w)
    assert p.streams[-1] == 5
    w.stream = 9  # the consumer stream is the one named now
    launch_double(w)
    assert p.streams[-1] == 9
    assert p.live == {}


def test_a_pointer_out_of_range_is_refused_for_a_tensor_header_seen_before(fake_driver):
    # Headers (dtype, shape, strides) are checked once; the data pointer of
    # each tensor is checked every time.
    launch_double(Producer(np.zeros(4, np.float32)))
    with pytest.raises(TypingError) as info:
        launch_double(Producer(np.zeros(4, np.float32), byte_offset=2 ** 63))
    assert "the 'data' pointer must be between 0 and 2**63-1" in first_line(info.value)
    p = Producer(np.zeros(4, np.float32), byte_offset=2 ** 63)
    with pytest.raises(TypeError, match=r"the 'data' pointer must be between 0 and 2\*\*63-1"):
        launch_double.overloads[launch_double.signatures[0]].entry_point(p)
    assert len(fake_driver.launches) == 1
