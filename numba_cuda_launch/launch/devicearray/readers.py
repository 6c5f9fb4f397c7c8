"""Reading device array objects -- numba-cuda arrays, the CUDA Array
Interface (versions 2 and 3), DLPack producers on a CUDA device -- into
checked descriptions and cached per-layout checks. What is accepted, the
DLPack ownership and the producer-stream rules: ``docs/devicearrays.md``.
"""

import ctypes
import datetime
import math
import operator
import struct
from collections.abc import Mapping
from typing import Any

import numba
import numpy as np
from numba.core.errors import NumbaError

from numba_cuda_launch.compat.cuda_target import cai_sync_enabled as sync_enabled

from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray
from numba_cuda_launch.launch.stream import Stream, python_stream, stream_handle

__all__ = ["on_stream", "describe", "device_array_type", "cai_layout", "cai_pointer", "c_strides", "cai_stream",
           "read_cai", "read_dlpack", "why_not_a_device_array", "Layout", "remember",
           "keep_type"]

_kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 2, 3, 13
_LEGACY_STREAM = 1  # CU_STREAM_LEGACY, as both protocols name the legacy default stream
_DEVICE_TYPES = (_kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged)
_DEVICE_ID_END = 1 << 31
_INTP_END = 1 << 63  # pointers, extents, strides, sizes in bytes and streams are intp values
_ADDRESS_END = 1 << 64


# The C structs of the DLPack header, read with one unpack each (native
# byte order, no padding: every field is at its natural alignment):
# DLTensor {void *data; DLDevice {int32 device_type, device_id}; int32 ndim;
# DLDataType {uint8 code, bits; uint16 lanes}; int64 *shape, *strides;
# uint64 byte_offset}, 48 bytes;
# DLManagedTensor {DLTensor dl_tensor; void *manager_ctx; void (*deleter)(...)};
# DLManagedTensorVersioned {DLPackVersion {uint32 major, minor}; void
# *manager_ctx; void (*deleter)(...); uint64 flags; DLTensor dl_tensor}.
_DL_TENSOR = "QiiiBBHQQQ"
_DL_MANAGED = struct.Struct("=" + _DL_TENSOR + "QQ")
_DL_VERSION = struct.Struct("=II")
_DL_VERSIONED_REST = struct.Struct("=QQQ" + _DL_TENSOR)  # after the version
_DL_BYTES = {name: ctypes.c_char * size for name, size in (
    (b"dltensor", _DL_MANAGED.size), (b"dltensor_versioned", 8 + _DL_VERSIONED_REST.size))}
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


def remember(cache, key, value, limit=4096):
    """``cache[key] = value``, *cache* (a dict) emptied first when it holds
    more than *limit* entries; returns *value*."""
    if len(cache) > limit:
        cache.clear()
    cache[key] = value
    return value


_KEPT_TYPES = set()


def keep_type(ty):
    """*ty*, kept alive for the process: Numba's dispatcher keeps only the
    codes of the types it is given."""
    _KEPT_TYPES.add(ty)
    return ty


def c_strides(shape, itemsize):
    """The strides of a C-contiguous array of *shape*."""
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


class _ManagedTensor:
    """A consumed DLPack managed tensor: its deleter runs when this object
    is freed (never earlier)."""

    __slots__ = ("address", "deleter")

    def __init__(self, address, deleter):
        self.address, self.deleter = address, _deleter(deleter)

    def __del__(self):
        if self.deleter is not None:
            self.deleter(self.address)


_DELETERS = {}  # a deleter's address -> a ctypes function calling it


def _deleter(address):
    if not address:
        return None
    fn = _DELETERS.get(address)
    return fn if fn is not None else remember(_DELETERS, address, _DELETER(address), 64)


class _Described:
    """What a device array object says about itself; *owner* is what must
    stay alive while its memory is used (a consumed DLPack tensor)."""

    __slots__ = ("data", "shape", "strides", "dtype", "readonly", "stream", "owner")

    def __init__(self, data, shape, strides, dtype, readonly, stream=None, owner=None):
        self.data, self.shape, self.dtype = data, tuple(shape), dtype
        self.strides = c_strides(self.shape, dtype.itemsize) if strides is None \
            else tuple(strides)
        self.readonly, self.stream, self.owner = readonly, stream, owner


def _layout_letter(shape, strides, itemsize):
    if 0 in shape or len(shape) == 0:
        return "C"
    return ("C" if _contiguous(shape, strides, itemsize, False)
            else "F" if _contiguous(shape, strides, itemsize, True)
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


_SPANS = {}  # (shape, strides, itemsize) -> _span(...)


def _pointer_error(data, span, shape, strides, align):
    """Why pointer *data* cannot address an array whose bytes are *span*
    (what :func:`_span` gives) from it, its items aligned to *align* bytes
    (None: it can)."""
    if not 0 <= data < _INTP_END:
        return "the 'data' pointer must be between 0 and 2**63-1, not %r" % (data,)
    if span != (0, 0) and (data + span[0] < 0 or data + span[1] > _ADDRESS_END):
        return ("'shape' %r with 'strides' %r from pointer %#x addresses bytes %d to %d, "
                "beyond 64-bit addresses"
                % (shape, strides, data, data + span[0], data + span[1] - 1))
    if data % align and span != (0, 0):
        # a kernel reading an item there faults (CUDA_ERROR_MISALIGNED_ADDRESS)
        return ("the data pointer %#x is not a multiple of %d, the alignment of its items "
                "(a kernel reading one there would fault)" % (data, align))
    return None


class Layout:
    """All of an array's description but its data pointer and stream,
    checked once (by the caller) and shared by the calls that see it again.
    *span* is :func:`_span`'s answer (a string: why it cannot be addressed);
    *sizes* is ``(itemsize, shape..., strides...)``, the middle of the fields
    :func:`.unbox.read_fields` gives."""

    __slots__ = ("dtype", "itemsize", "shape", "strides", "readonly", "span", "sizes", "_type")

    def __init__(self, dtype, shape, strides, readonly):
        self.dtype, self.itemsize, self.shape, self.readonly = \
            dtype, dtype.itemsize, shape, readonly
        self.strides = c_strides(shape, dtype.itemsize) if strides is None else strides
        self.span = _span(shape, self.strides, self.itemsize)
        self.sizes = (self.itemsize,) + shape + self.strides
        self._type = None

    def pointer_error(self, data):
        """Why *data* cannot point to this array (None: it can)."""
        return _pointer_error(data, self.span, self.shape, self.strides, self.dtype.alignment)

    def type(self):
        """Its :class:`DeviceArray` type (TypeError for a dtype Numba has
        no type for), kept alive for the process as types given to the
        dispatcher must be."""
        if self._type is None:
            self._type = keep_type(device_array_type(self))
        return self._type


class on_stream:
    """``on_stream(obj, stream)``, passed where device array *obj* (of any
    producer) would go: compiled code will use it on *stream* (a stream
    object or a raw ``CUstream`` integer). A DLPack producer is given that
    stream (``__dlpack__(stream=...)``; 0, the default stream, as 1) to
    order its work before it; a ``__cuda_array_interface__`` producer's
    stream is still waited for by launches on other streams."""

    __slots__ = ("obj", "stream", "_given", "_handle", "__weakref__")
    obj: Any
    stream: Stream

    def __init__(self, obj: Any, stream: Stream) -> None:
        self.obj = obj
        self.stream = stream
        self._given = self._handle = _UNSET

    def _consumer_stream(self):
        # Read at every call: the handle of the stream object given last
        # (stream objects do not change their handle).
        stream = self.stream
        if stream is self._given:
            return self._handle
        if stream is None:
            handle = None
        else:
            handle = python_stream(stream)  # the Python forms' rule: TypeError for a float
            if not isinstance(handle, int):
                handle = stream_handle(handle)
        self._given, self._handle = stream, handle
        return handle


_UNSET = object()


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
    cai = getattr(obj, "__cuda_array_interface__", None)  # no exception when it has none
    if cai is None and hasattr(type(obj), "__cuda_array_interface__"):
        return obj.__cuda_array_interface__  # what failed, raised
    return cai


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
    desc = _Described(pointer, shape, strides, dtype, bool(data[1]), stream or None)
    key = (desc.shape, desc.strides, dtype.itemsize)
    span = _SPANS.get(key) or remember(_SPANS, key, _span(*key))
    why = span if type(span) is str else \
        _pointer_error(pointer, span, desc.shape, desc.strides, dtype.alignment)
    if why is not None:
        raise _cai_error(why)
    return desc


_CAI_LAYOUTS = {}  # (typestr, shape, strides, read-only, pointer and stream kinds, ...) -> Layout


def cai_layout(cai):
    """The :class:`Layout` of a CUDA Array Interface dict, every entry
    checked (:func:`_from_cai`) the first time its type string, shape,
    strides, read-only flag, version and kinds of pointer and stream are
    seen; later, the data pointer's value (not part of a type) is left to
    :func:`cai_pointer`. The one reading of the interface, for typing and
    unboxing; TypeError saying what is wrong."""
    try:
        data = cai["data"]
        key = (cai["typestr"], cai["shape"], cai.get("strides"), data[1], type(data[0]),
               cai["version"], type(cai.get("stream")))
        layout = _CAI_LAYOUTS.get(key) if cai.get("mask") is None else None
    except Exception:  # not such a dict, or an unhashable entry: checked whole
        key = layout = None
    if layout is None:
        desc = _from_cai(cai)
        layout = Layout(desc.dtype, desc.shape, desc.strides, desc.readonly)
        if key is not None:
            remember(_CAI_LAYOUTS, key, layout)
    return layout


def cai_pointer(cai, layout):
    """The data pointer of a CUDA Array Interface dict of *layout*, checked
    against it at each call (TypeError saying what is wrong)."""
    data = cai["data"][0]
    pointer = 0 if data is None else _index(data, "the 'data' pointer")
    why = layout.pointer_error(pointer)
    if why is not None:
        raise _cai_error(why)
    return pointer


# -- DLPack ----------------------------------------------------------------------------

def _dlpack_error(what):
    return TypeError("DLPack: " + what)


def _dlpack_device(obj):
    """``obj.__dlpack_device__()`` checked: ``(device_type, device_id)``."""
    try:
        device = obj.__dlpack_device__()
    except Exception as exc:
        raise _dlpack_error("__dlpack_device__() raised %s: %s" % (type(exc).__name__, exc)) \
            from exc
    if type(device) is tuple and len(device) == 2 and type(device[0]) is int and \
            type(device[1]) is int and 0 <= device[1] < _DEVICE_ID_END:
        return device  # what the checks below give for it
    if not isinstance(device, (tuple, list)) or len(device) != 2:
        raise _dlpack_error("__dlpack_device__() returned %r; a (device_type, device_id) "
                            "pair of integers was expected" % (device,))
    device = tuple(_index(d, "__dlpack_device__() entries", _dlpack_error) for d in device)
    # DLDevice.device_id: an int32 ordinal (another device type is refused as such)
    if device[0] in _DEVICE_TYPES and not 0 <= device[1] < _DEVICE_ID_END:
        raise _dlpack_error("__dlpack_device__() returned %r; its device_id must be a device "
                            "ordinal, 0 to 2**31-1" % (device,))
    return device


def _dlpack_capsule(obj, stream):
    """``obj.__dlpack__(stream=...)``: a capsule not yet consumed, and its name."""
    try:
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=(_DL_MAJOR, 0))
        except TypeError:  # a producer of DLPack < 1.0
            capsule = obj.__dlpack__(stream=stream)
    except Exception as exc:
        raise _dlpack_error("__dlpack__(stream=%r) raised %s: %s"
                            % (stream, type(exc).__name__, exc)) from exc
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


def _dlpack_dtype(code, bits, lanes):
    dtype = _DL_DTYPES.get((code, bits)) if lanes == 1 else None
    if dtype is None:
        raise _dlpack_error("dtype (code %d, %d bits, %d lanes) has no NumPy equivalent "
                            "(whole-byte integers, floats, complex numbers and bool, one "
                            "lane, are supported)" % (code, bits, lanes))
    return dtype


_INT64S = {}  # n -> (ctypes type of n int64s, its struct)


def _int64s(address, n):
    """The *n* int64 values at *address*."""
    if n == 0:
        return ()
    found = _INT64S.get(n)
    if found is None:
        found = _INT64S[n] = (ctypes.c_char * (8 * n), struct.Struct("=%dq" % n))
    return found[1].unpack_from(found[0].from_address(address))


_DL_LAYOUTS = {}  # (code, bits, lanes, shape, strides, read-only) -> Layout


def _dlpack_layout(key):
    """The :class:`Layout` of a DLPack tensor header, checked."""
    code, bits, lanes, shape, strides, readonly = key
    dtype = _dlpack_dtype(code, bits, lanes)
    if any(n < 0 for n in shape):
        raise _dlpack_error("shape %r has a negative extent" % (shape,))
    layout = Layout(dtype, shape, None if strides is None else
                    tuple(n * dtype.itemsize for n in strides), readonly)
    if type(layout.span) is str:
        raise _dlpack_error(layout.span)
    return remember(_DL_LAYOUTS, key, layout)


def _read_dlpack(obj, consumer):
    """``(layout, data, owner)`` of a DLPack producer on a CUDA device (None
    for another device), its capsule consumed: *owner* holds the managed
    tensor, whose deleter runs when it is freed. Everything is checked
    before the capsule is consumed (a refused capsule is freed by its own
    destructor); a header seen before (its dtype, shape and strides) was
    checked then, its data pointer is checked each time."""
    if _dlpack_device(obj)[0] not in _DEVICE_TYPES:
        return None
    capsule, name = _dlpack_capsule(obj, _LEGACY_STREAM if not consumer else consumer)
    ptr = _capsule_pointer(capsule, name)
    header = _DL_BYTES[name].from_address(ptr)
    if name == b"dltensor_versioned":
        major, minor = _DL_VERSION.unpack_from(header)
        if major != _DL_MAJOR:  # its other fields may be laid out otherwise
            raise _dlpack_error("the capsule is of DLPack version %d.%d; version %d.x is "
                                "supported" % (major, minor, _DL_MAJOR))
        (_, deleter, flags, data, _, _, ndim, code, bits, lanes, shape_at, strides_at,
         offset) = _DL_VERSIONED_REST.unpack_from(header, _DL_VERSION.size)
        readonly = bool(flags & _DL_FLAG_READ_ONLY)
    else:
        (data, _, _, ndim, code, bits, lanes, shape_at, strides_at, offset, _,
         deleter) = _DL_MANAGED.unpack_from(header)
        readonly = False
    if ndim < 0:
        _dlpack_dtype(code, bits, lanes)  # a wrong dtype is said first
        raise _dlpack_error("ndim is %d" % ndim)
    if ndim and not shape_at:
        raise _dlpack_error("shape is a NULL pointer (ndim %d)" % ndim)
    key = (code, bits, lanes, _int64s(shape_at, ndim),
           _int64s(strides_at, ndim) if strides_at else None, readonly)
    layout = _DL_LAYOUTS.get(key) or _dlpack_layout(key)
    data += offset
    why = layout.pointer_error(data)
    if why is not None:
        raise _dlpack_error(why)
    _capsule_set_name(capsule, _CONSUMED[name])
    return layout, data, _ManagedTensor(ptr, deleter)


def _from_dlpack(obj, consumer):
    """Describe a DLPack producer on a CUDA device (None for another
    device), consuming its capsule (see :func:`_read_dlpack`)."""
    found = _read_dlpack(obj, consumer)
    if found is None:
        return None
    layout, data, owner = found
    return _Described(data, layout.shape, layout.strides, layout.dtype, layout.readonly,
                      owner=owner)


def read_dlpack(obj):
    """:func:`_read_dlpack` for *obj*, a DLPack producer or one wrapped in
    :class:`on_stream`; None when it is none (or is on another device).
    NumPy arrays are not read: host memory."""
    consumer = None  # (not a helper shared with describe: this runs at every call)
    if isinstance(obj, on_stream):
        obj, consumer = obj.obj, obj._consumer_stream()
    if isinstance(obj, np.ndarray) or not (hasattr(obj, "__dlpack__") and
                                           hasattr(obj, "__dlpack_device__")):
        return None
    return _read_dlpack(obj, consumer)


# -- the backend's own device arrays -----------------------------------------------

def declaring_classes():
    """The backend's device array classes (numba-cuda's; the simulator's
    under it): their objects declare their type with ``_numba_type_``."""
    return BACKEND.array_classes()


def _from_backend(obj):
    """The backend's own reading of *obj* (the simulator's arrays: host
    memory standing for device memory), or None."""
    own = BACKEND.describe_array(obj)
    return None if own is None else _Described(*own)


def describe(obj):
    """Read a device array object, checked; None when it is not one."""
    consumer = None
    if isinstance(obj, on_stream):
        obj, consumer = obj.obj, obj._consumer_stream()
    if isinstance(obj, np.ndarray) and not isinstance(obj, declaring_classes()):
        return None
    own = _from_backend(obj)
    if own is not None:
        return own
    cai = read_cai(obj)
    if cai is not None:
        return _from_cai(cai)
    if BACKEND.device_memory and hasattr(obj, "__dlpack__") and \
            hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, consumer)
    return None


def device_array_type(desc):
    """The :class:`DeviceArray` type of a described array (TypeError for a
    dtype Numba has no type for)."""
    try:
        dtype = numba.from_dtype(desc.dtype)
    except (NotImplementedError, NumbaError):
        raise TypeError("dtype %r has no Numba type" % (desc.dtype,)) from None
    return DeviceArray(dtype, len(desc.shape),
                       _layout_letter(desc.shape, desc.strides, desc.dtype.itemsize),
                       desc.readonly)


def why_not_a_device_array(val):
    """Why an object that offers a device-array interface cannot be passed
    as one (its interface raised, or says something unusable), or None."""
    if not BACKEND.device_memory:
        return None  # host memory stands for device memory: whatever describe() reads
    if isinstance(val, on_stream):
        inner = val.obj
        if isinstance(inner, np.ndarray) and not isinstance(inner, declaring_classes()):
            return "on_stream() wraps a device array; it was given a NumPy array (host memory)"
        if not (hasattr(inner, "__cuda_array_interface__") or hasattr(inner, "__dlpack__")):
            return ("on_stream() wraps a device array (an object with __cuda_array_interface__ "
                    "or __dlpack__); it was given %s" % type(inner).__name__)
        return why_not_a_device_array(inner)
    if isinstance(val, np.ndarray):
        return None
    try:
        cai = read_cai(val)
    except Exception as e:
        return "reading its __cuda_array_interface__ raised %s: %s" % (type(e).__name__, e)
    try:
        if cai is not None:
            device_array_type(_from_cai(cai))
        elif hasattr(val, "__dlpack__") and not hasattr(val, "__dlpack_device__"):
            return ("%s has __dlpack__ but no __dlpack_device__, which a DLPack producer also "
                    "defines (it says which device the tensor is on)" % type(val).__name__)
        elif hasattr(val, "__dlpack__"):
            device = _dlpack_device(val)
            if device[0] not in _DEVICE_TYPES:
                return ("its DLPack device %r is not a CUDA device (device types %s: "
                        "CUDA, CUDA host, CUDA managed memory)" % (device, _DEVICE_TYPES))
            device_array_type(_from_dlpack(val, None))
    except Exception as e:
        return "%s is not a usable device array: %s" % (type(val).__name__, e)
    return None
