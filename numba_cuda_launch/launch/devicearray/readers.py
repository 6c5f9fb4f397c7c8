"""Reading device array objects: numba-cuda arrays, the CUDA Array
Interface, DLPack (see ``docs/devicearrays.md``).

An object is read as a device array when it is

* a numba-cuda device array (``cuda.to_device``, ``device_array``,
  ``mapped_array``, ``managed_array``);
* any object exposing ``__cuda_array_interface__`` (versions 2 and 3: CuPy
  arrays, PyTorch CUDA tensors, JAX GPU arrays, numba-cuda arrays);
* any object with ``__dlpack__``/``__dlpack_device__`` on a CUDA device
  (CUDA, CUDA host or CUDA managed memory), read through a DLPack capsule,
  which the reader consumes (renamed ``used_dltensor``; the managed tensor's
  deleter runs when the :class:`_Described` holding it is freed).

Every entry is checked (TypeError saying which one is wrong), and the memory
an array addresses (lowest to highest byte) must lie in 64-bit addresses.

Producer streams: a ``__cuda_array_interface__`` v3 ``stream`` entry is the
stream a launch on another stream waits for (:mod:`.producer_wait`); DLPack
producers are given the consumer stream, ``__dlpack__(stream=...)``: the one
named with :class:`on_stream`, else 1, the legacy default stream (DLPack's
name for the default stream, 0 being disallowed on CUDA).
"""

import ctypes
import datetime
import math
import operator
from collections.abc import Mapping

import numba
import numpy as np
from numba.core.errors import NumbaError
from numba.cuda import config as _cuda_config

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray
from numba_cuda_launch.launch.stream import stream_handle
from numba_cuda_launch.launch.sync import python_stream

__all__ = ["on_stream", "describe", "device_array_type", "c_strides", "cai_stream",
           "read_cai", "why_not_a_device_array"]

_kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 2, 3, 13
_LEGACY_STREAM = 1  # CU_STREAM_LEGACY, as both protocols name the legacy default stream
_DEVICE_TYPES = (_kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged)
_INTP_END = 1 << 63  # pointers, extents, strides, sizes in bytes and streams are intp values
_ADDRESS_END = 1 << 64


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DL_FLAG_READ_ONLY = 1
_DL_MAJOR = 1  # the major version of the layout above


def _python_api(name, restype, *argtypes):
    """A C API function with prototypes of its own (``ctypes.pythonapi``'s
    attributes are shared: another module may set theirs)."""
    return ctypes.PYFUNCTYPE(restype, *argtypes)((name, ctypes.pythonapi))


_capsule_pointer = _python_api("PyCapsule_GetPointer", ctypes.c_void_p, ctypes.py_object,
                               ctypes.c_char_p)
_capsule_name = _python_api("PyCapsule_GetName", ctypes.c_char_p, ctypes.py_object)
_capsule_set_name = _python_api("PyCapsule_SetName", ctypes.c_int, ctypes.py_object,
                                ctypes.c_char_p)
_PyCapsule = type(datetime.datetime_CAPI)
# A consumed capsule's name; the capsule keeps the pointer: these bytes
# live as long as the module.
_CONSUMED = {b"dltensor": b"used_dltensor", b"dltensor_versioned": b"used_dltensor_versioned"}
_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# DLDataType (code, bits) -> NumPy dtype
_DL_DTYPES = {(code, bits): np.dtype("%s%d" % (kind, bits // 8))
              for code, kind, sizes in ((0, "i", (8, 16, 32, 64)), (1, "u", (8, 16, 32, 64)),
                                        (2, "f", (16, 32, 64)), (5, "c", (64, 128)))
              for bits in sizes}
_DL_DTYPES[6, 8] = np.dtype("?")


def c_strides(shape, itemsize):
    """The strides of a C-contiguous array of *shape*."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class _ManagedTensor:
    """A consumed DLPack managed tensor: the consumer owns it, and its
    deleter runs when this object is freed (never earlier)."""

    __slots__ = ("address", "deleter")

    def __init__(self, address, deleter):
        self.address, self.deleter = address, _DELETER(deleter) if deleter else None

    def __del__(self):
        if self.deleter is not None:
            self.deleter(self.address)


class _Described:
    """What a device array object says about itself; *owner* is what must
    stay alive while its memory is used (a consumed DLPack tensor)."""

    __slots__ = ("data", "shape", "strides", "dtype", "readonly", "stream", "owner")

    def __init__(self, data, shape, strides, dtype, readonly, stream=None, owner=None):
        self.data, self.shape, self.dtype = data, tuple(shape), dtype
        self.strides = c_strides(self.shape, dtype.itemsize) if strides is None \
            else tuple(strides)
        self.readonly, self.stream, self.owner = readonly, stream, owner

    @property
    def layout(self):
        if 0 in self.shape or len(self.shape) == 0:
            return "C"
        return ("C" if _contiguous(self.shape, self.strides, self.dtype.itemsize, False)
                else "F" if _contiguous(self.shape, self.strides, self.dtype.itemsize, True)
                else "A")


def _contiguous(shape, strides, itemsize, fortran):
    dims = list(zip(shape, strides))
    if not fortran:
        dims.reverse()
    expect = itemsize
    for n, s in dims:
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


def _span(shape, strides, itemsize):
    """``(lowest, highest + 1)`` byte offsets from the data pointer that an
    array of *shape* and *strides* (bytes) addresses, ``(0, 0)`` for none;
    or why it cannot be addressed (every value must be an intp)."""
    if shape and (max(shape) >= _INTP_END or math.prod(shape) * itemsize >= _INTP_END):
        return "'shape' %r of %d-byte items is larger than the address space" % (shape, itemsize)
    if shape and not -_INTP_END < min(strides) <= max(strides) < _INTP_END:
        return "'strides' %r are larger than the address space" % (strides,)
    if 0 in shape:
        return 0, 0
    return (sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0),
            sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0) + itemsize)


_SPANS = {}  # (shape, strides, itemsize) -> _span(...): read at every call


def _extent_error(data, shape, strides, itemsize):
    """Why memory of *shape* and *strides* (bytes) from pointer *data*
    cannot be addressed by compiled code (None: it can): the bytes from the
    lowest to the highest addressed must lie in 64-bit addresses."""
    key = (shape, strides, itemsize)
    span = _SPANS.get(key)
    if span is None:
        if len(_SPANS) > 4096:
            _SPANS.clear()
        span = _SPANS[key] = _span(shape, strides, itemsize)
    if type(span) is str:
        return span
    if not 0 <= data < _INTP_END:
        return "the 'data' pointer must be between 0 and 2**63-1, not %r" % (data,)
    if span != (0, 0) and (data + span[0] < 0 or data + span[1] > _ADDRESS_END):
        return ("'shape' %r with 'strides' %r from pointer %#x addresses bytes %d to %d, "
                "beyond 64-bit addresses"
                % (shape, strides, data, data + span[0], data + span[1] - 1))
    return None


class on_stream:
    """``on_stream(obj, stream)``: device array *obj* (of any producer) as an
    argument of compiled code that will use it on *stream* (a stream object
    or a raw ``CUstream`` integer): DLPack producers are given that stream
    (``__dlpack__(stream=...)``; 0, the default stream, is given as 1, its
    DLPack name) to order their work before it; for
    ``__cuda_array_interface__`` producers the rule stays the one of
    :mod:`.producer_wait` (their stream is waited for by launches on other
    streams). Pass the wrapper where the array would go."""

    __slots__ = ("obj", "stream")

    def __init__(self, obj, stream):
        self.obj = obj
        self.stream = stream

    def _consumer_stream(self):
        if self.stream is None:
            return None
        stream = python_stream(self.stream)  # the Python forms' rule: TypeError for a float
        return stream if isinstance(stream, int) else stream_handle(stream)


# -- the CUDA Array Interface ----------------------------------------------------------

def _cai_error(what):
    return TypeError("__cuda_array_interface__: " + what)


def _index(value, what, error=_cai_error):
    """*value* as a Python int (any integer type but bool), else TypeError."""
    if isinstance(value, (bool, np.bool_)):
        raise error("%s must be an integer, not %r" % (what, value))
    try:
        return operator.index(value)
    except TypeError:
        raise error("%s must be an integer, not %r" % (what, value)) from None


def cai_stream(stream):
    """The producer stream a version 3 ``stream`` entry names (0: none). A
    stream handle is an integer from 0 to 2**63-1; 0, which the interface
    disallows, is read as numba-cuda reads it: the legacy default stream."""
    if stream is None:
        return 0
    handle = _index(stream, "'stream'")
    if not 0 <= handle < _INTP_END:
        raise _cai_error("'stream' must be None or a stream handle (an integer from 0 to "
                         "2**63-1), not %r" % (stream,))
    return handle or _LEGACY_STREAM


def read_cai(obj):
    """``obj.__cuda_array_interface__``, None when *obj* has none; an
    AttributeError raised by the class's own attribute (a property failing
    inside) is raised, not read as "no interface"."""
    try:
        return obj.__cuda_array_interface__
    except AttributeError:
        if hasattr(type(obj), "__cuda_array_interface__"):
            raise
        return None


def _from_cai(cai):
    """Describe a CUDA Array Interface dict, every entry checked (TypeError
    saying which one is wrong)."""
    if not isinstance(cai, Mapping):
        raise _cai_error("a dict was expected, not %s" % type(cai).__name__)
    if "version" not in cai:
        raise _cai_error("no 'version' entry")
    version = cai["version"]
    if not isinstance(version, int) or version < 2:
        raise _cai_error("version %r: versions 2 and 3 are supported" % (version,))
    if cai.get("mask") is not None:
        raise _cai_error("a mask is not supported")
    for key in ("shape", "typestr", "data"):
        if key not in cai:
            raise _cai_error("no %r entry" % key)
    shape = cai["shape"]
    if not isinstance(shape, (tuple, list)):
        raise _cai_error("'shape' must be a tuple of integers, not %r" % (shape,))
    shape = tuple(_index(n, "'shape' entries") for n in shape)
    if any(n < 0 for n in shape):
        raise _cai_error("'shape' %r has a negative extent" % (shape,))
    try:
        dtype = np.dtype(cai["typestr"])
    except (TypeError, ValueError) as e:
        raise _cai_error("'typestr' %r is not a NumPy dtype (%s)" % (cai["typestr"], e)) from None
    if dtype.hasobject:
        raise _cai_error("'typestr' %r is Python objects, which device memory cannot hold"
                         % (cai["typestr"],))
    strides = cai.get("strides")
    if strides is None and dtype.itemsize * math.prod(shape[1:]) >= _INTP_END:  # implied
        raise _cai_error("'shape' %r of %s is larger than the address space" % (shape, dtype))
    if strides is not None:
        if not isinstance(strides, (tuple, list)) or len(strides) != len(shape):
            raise _cai_error("'strides' %r do not match 'shape' %r" % (strides, shape))
        strides = tuple(_index(n, "'strides' entries") for n in strides)
    data = cai["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise _cai_error("'data' must be (pointer, read_only), not %r" % (data,))
    pointer = 0 if data[0] is None else _index(data[0], "the 'data' pointer")
    stream = cai_stream(cai.get("stream")) if version >= 3 else 0
    return _checked(_Described(pointer, shape, strides, dtype, bool(data[1]), stream or None),
                    _cai_error)


def _checked(desc, error):
    why = _extent_error(desc.data, desc.shape, desc.strides, desc.dtype.itemsize)
    if why is not None:
        raise error(why)
    return desc


# -- DLPack ----------------------------------------------------------------------------

def _dlpack_error(what):
    return TypeError("DLPack: " + what)


def _dlpack_device(obj):
    """``obj.__dlpack_device__()`` checked: ``(device_type, device_id)``."""
    device = obj.__dlpack_device__()
    if not isinstance(device, (tuple, list)) or len(device) != 2:
        raise _dlpack_error("__dlpack_device__() returned %r; a (device_type, device_id) "
                            "pair of integers was expected" % (device,))
    return tuple(_index(d, "__dlpack_device__() entries", _dlpack_error) for d in device)


def _dlpack_capsule(obj, stream):
    """``obj.__dlpack__(stream=...)``: a capsule not yet consumed, and its name."""
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=(_DL_MAJOR, 0))
    except TypeError:  # a producer of DLPack < 1.0
        capsule = obj.__dlpack__(stream=stream)
    if type(capsule) is not _PyCapsule:
        raise _dlpack_error("__dlpack__() returned %s, not a DLPack capsule"
                            % type(capsule).__name__)
    name = _capsule_name(capsule)
    if name not in _CONSUMED:
        raise _dlpack_error("__dlpack__() returned a capsule named %r%s; 'dltensor' or "
                            "'dltensor_versioned' was expected" % (
                                (name or b"").decode(errors="replace"),
                                " (already consumed)" if (name or b"").startswith(b"used_")
                                else ""))
    return capsule, name


def _dlpack_dtype(dt):
    dtype = _DL_DTYPES.get((dt.code, dt.bits)) if dt.lanes == 1 else None
    if dtype is None:
        raise _dlpack_error("dtype (code %d, %d bits, %d lanes) has no NumPy equivalent "
                            "(whole-byte integers, floats, complex numbers and bool, one "
                            "lane, are supported)" % (dt.code, dt.bits, dt.lanes))
    return dtype


def _from_dlpack(obj, consumer):
    """Describe a DLPack producer on a CUDA device (None for another
    device), consuming its capsule; everything checked before it is
    consumed (a refused capsule is freed by its own destructor)."""
    if _dlpack_device(obj)[0] not in _DEVICE_TYPES:
        return None
    capsule, name = _dlpack_capsule(obj, _LEGACY_STREAM if not consumer else consumer)
    ptr = _capsule_pointer(capsule, name)
    readonly = False
    if name == b"dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(ptr)
        if managed.major != _DL_MAJOR:  # its other fields may be laid out otherwise
            raise _dlpack_error("the capsule is of DLPack version %d.%d; version %d.x is "
                                "supported" % (managed.major, managed.minor, _DL_MAJOR))
        readonly = bool(managed.flags & _DL_FLAG_READ_ONLY)
    else:
        managed = _DLManagedTensor.from_address(ptr)
    tensor = managed.dl_tensor
    dtype = _dlpack_dtype(tensor.dtype)
    ndim = tensor.ndim
    if ndim < 0:
        raise _dlpack_error("ndim is %d" % ndim)
    shape = tuple(tensor.shape[i] for i in range(ndim))
    if any(n < 0 for n in shape):
        raise _dlpack_error("shape %r has a negative extent" % (shape,))
    strides = None if not tensor.strides else \
        [tensor.strides[i] * dtype.itemsize for i in range(ndim)]
    desc = _checked(_Described((tensor.data or 0) + tensor.byte_offset, shape, strides, dtype,
                               readonly), _dlpack_error)
    _capsule_set_name(capsule, _CONSUMED[name])
    desc.owner = _ManagedTensor(ptr, managed.deleter)
    return desc


# -- numba-cuda and the simulator ------------------------------------------------------

def numba_cuda_array_classes():
    """numba-cuda's device array base class (none under the simulator)."""
    if _compat.simulator_enabled():
        return ()
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase

    return (DeviceNDArrayBase,)


def declaring_classes():
    """numba-cuda's device array classes (simulated ones under the
    simulator): their objects declare their type with ``_numba_type_``."""
    if _compat.simulator_enabled():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return (FakeCUDAArray,)
    return numba_cuda_array_classes()


def _from_simulator(obj):
    """numba-cuda's simulated device arrays (host memory standing for device
    memory) and objects exposing the CUDA Array Interface under the
    simulator."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    if isinstance(obj, FakeCUDAArray):
        ary = obj._ary
        return _Described(ary.ctypes.data, ary.shape, ary.strides, ary.dtype,
                          not ary.flags.writeable)
    cai = read_cai(obj)
    return _from_cai(cai) if cai is not None else None


def describe(obj):
    """Read a device array object (see the module docstring); None when it
    is not one."""
    consumer = None
    if isinstance(obj, on_stream):
        consumer = obj._consumer_stream()
        obj = obj.obj
    if isinstance(obj, np.ndarray) and not isinstance(obj, numba_cuda_array_classes()):
        return None
    if _compat.simulator_enabled():
        return _from_simulator(obj)
    cai = read_cai(obj)
    if cai is not None:
        return _from_cai(cai)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, consumer)
    return None


def device_array_type(desc):
    """The :class:`DeviceArray` type of a described array (TypeError for a
    dtype Numba has no type for)."""
    try:
        dtype = numba.from_dtype(desc.dtype)
    except (NotImplementedError, NumbaError):
        raise TypeError("dtype %r has no Numba type" % (desc.dtype,)) from None
    return DeviceArray(dtype, len(desc.shape), desc.layout, desc.readonly)


def sync_enabled():
    """numba-cuda's ``NUMBA_CUDA_ARRAY_INTERFACE_SYNC`` setting, as it is now."""
    return getattr(_cuda_config, "CUDA_ARRAY_INTERFACE_SYNC", True)


def why_not_a_device_array(val):
    """Why an object that offers a device-array interface cannot be passed
    as one (its interface raised, or says something unusable), or None."""
    if isinstance(val, on_stream) and not _compat.simulator_enabled():
        inner = val.obj
        if isinstance(inner, np.ndarray) and not isinstance(inner, numba_cuda_array_classes()):
            return "on_stream() wraps a device array; it was given a NumPy array (host memory)"
        if not (hasattr(inner, "__cuda_array_interface__") or hasattr(inner, "__dlpack__")):
            return ("on_stream() wraps a device array (an object with __cuda_array_interface__ "
                    "or __dlpack__); it was given %s" % type(inner).__name__)
        return why_not_a_device_array(inner)
    if isinstance(val, np.ndarray) or _compat.simulator_enabled():
        return None
    try:
        cai = read_cai(val)
    except Exception as e:
        return "reading its __cuda_array_interface__ raised %s: %s" % (type(e).__name__, e)
    try:
        if cai is not None:
            device_array_type(_from_cai(cai))
        elif hasattr(val, "__dlpack__") and hasattr(val, "__dlpack_device__"):
            device = _dlpack_device(val)
            if device[0] not in _DEVICE_TYPES:
                return ("its DLPack device %r is not a CUDA device (device types %s: "
                        "CUDA, CUDA host, CUDA managed memory)" % (device, _DEVICE_TYPES))
            device_array_type(_from_dlpack(val, None))
    except Exception as e:
        return "%s is not a usable device array: %s" % (type(val).__name__, e)
    return None
