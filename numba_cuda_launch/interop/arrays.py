"""Device-array producers: numba-cuda, the CUDA Array Interface, DLPack.

An object passed into an ``@njit``/``@cfunc`` function is typed as a
:class:`~numba_cuda_launch.launch.devicearray.DeviceArray` when it is

* a numba-cuda device array (``cuda.to_device``, ``device_array``,
  ``mapped_array``, ``managed_array``);
* any object exposing ``__cuda_array_interface__`` (versions 2 and 3: CuPy
  arrays, PyTorch CUDA tensors, JAX GPU arrays, numba-cuda arrays);
* any object with ``__dlpack__``/``__dlpack_device__`` on a CUDA device
  (CUDA, CUDA host or CUDA managed memory), read through a DLPack capsule.

The interface is read when the argument is typed (dtype, ndim, layout from
the strides, read-only from ``data[1]`` or the DLPack read-only flag) and
again at each call (pointer, shape, strides).

Producer streams (the exact rule):

* ``__cuda_array_interface__`` with a ``stream`` entry (version 3) that is
  not None: the array carries that producer stream (none when numba-cuda's
  ``NUMBA_CUDA_ARRAY_INTERFACE_SYNC`` setting is 0), and a launch on another
  stream synchronises it first, as numba-cuda does
  (:mod:`..launch.producer_wait`); no entry or None: nothing to wait for.
* DLPack: ``__dlpack__(stream=...)`` is given the consumer stream: the
  stream named with :func:`on_stream` (``on_stream(x, s)``), else 1, the
  legacy default stream (DLPack's meaning of no stream), with which kernels
  launched on blocking streams are ordered. Work that runs on a
  non-blocking stream must name it with :func:`on_stream`.
"""

import ctypes
import math
import operator
import threading
import weakref
from collections.abc import Mapping

import numba
import numpy as np
from numba.core import types
from numba.core.errors import NumbaError
from numba.core.typing.typeof import typeof_impl
from numba.cuda import config as _cuda_config

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.compat.numba_caching import has_reload_checks
from numba_cuda_launch.compat.numba_typeof import type_unknown_objects_with
from numba_cuda_launch.compat.numba_dispatcher import explain_argument_errors, register_typeof, \
    route_numba_type_mismatches
from numba_cuda_launch.launch.devicearray import DeviceArray
from numba_cuda_launch.launch.devicearray_unbox import CACHED_FIELDS, TYPED_FIELDS, \
    set_cached_classes, set_describer
from numba_cuda_launch.launch.sync import python_stream
from numba_cuda_launch.launch.stream import cuda_stream, is_stream_object, learn_stream_class, \
    stream_handle
from numba_cuda_launch.interop import producers as _producers

__all__ = ["on_stream", "describe", "device_array_type"]

_kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged = 2, 3, 13
_LEGACY_STREAM = 1  # CU_STREAM_LEGACY, as the interface names the legacy default stream
_DEVICE_TYPES = (_kDLCUDA, _kDLCUDAHost, _kDLCUDAManaged)
_INTP_END = 1 << 63  # pointers, extents, strides and sizes in bytes are intp values


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64), ("dl_tensor", _DLTensor)]


_DL_FLAG_READ_ONLY = 1
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype = ctypes.c_void_p
_capsule_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_name = ctypes.pythonapi.PyCapsule_GetName
_capsule_name.restype = ctypes.c_char_p
_capsule_name.argtypes = [ctypes.py_object]
# DLDataType code -> numpy kind
_DL_KINDS = {0: "i", 1: "u", 2: "f", 5: "c", 6: "b"}


class _Described:
    """What a device array object says about itself."""

    __slots__ = ("data", "shape", "strides", "dtype", "readonly", "stream", "keepalive")

    def __init__(self, data, shape, strides, dtype, readonly, stream=None, keepalive=None):
        self.data, self.shape, self.dtype = data, tuple(shape), dtype
        if strides is None:  # C-contiguous
            strides, step = [], dtype.itemsize
            for n in reversed(self.shape):
                strides.insert(0, step)
                step *= n
        self.strides = tuple(strides)
        self.readonly, self.stream, self.keepalive = readonly, stream, keepalive

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


class on_stream:
    """``on_stream(obj, stream)``: device array *obj* (of any producer) as an
    argument of compiled code that will use it on *stream* (a stream object
    or a raw ``CUstream`` integer): DLPack producers are given that stream
    (``__dlpack__(stream=...)``) to order their work before it; for
    ``__cuda_array_interface__`` producers the rule stays the one of
    :mod:`..launch.producer_wait` (their stream is waited for by launches
    on other streams). Pass the wrapper where the array would go."""

    __slots__ = ("obj", "stream")

    def __init__(self, obj, stream):
        self.obj = obj
        self.stream = stream

    def _consumer_stream(self):
        if self.stream is None:
            return None
        stream = python_stream(self.stream)  # the Python forms' rule: TypeError for a float
        return stream if isinstance(stream, int) else stream_handle(stream)


def _cai_error(what):
    return TypeError("__cuda_array_interface__: " + what)


def _index(value, what):
    """*value* as a Python int (any integer type but bool), else TypeError."""
    if isinstance(value, (bool, np.bool_)):
        raise _cai_error("%s must be an integer, not %r" % (what, value))
    try:
        return operator.index(value)
    except TypeError:
        raise _cai_error("%s must be an integer, not %r" % (what, value)) from None


def _cai_stream(stream):
    """The producer stream a version 3 ``stream`` entry names (0: none). A
    stream handle is a non-negative integer; 0, which the interface
    disallows, is read as numba-cuda reads it: the legacy default stream."""
    if stream is None:
        return 0
    handle = _index(stream, "'stream'")
    if handle < 0:
        raise _cai_error("'stream' must be None or a stream handle (an integer >= 0), "
                         "not %r" % (stream,))
    return handle or _LEGACY_STREAM


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
    size = math.prod(shape)
    step = dtype.itemsize * math.prod(shape[1:])  # the largest C stride, when implied
    if size * dtype.itemsize >= _INTP_END or any(n >= _INTP_END for n in shape) or \
            (cai.get("strides") is None and step >= _INTP_END):
        raise _cai_error("'shape' %r of %s is larger than the address space"
                         % (shape, dtype))
    strides = cai.get("strides")
    if strides is not None:
        if not isinstance(strides, (tuple, list)) or len(strides) != len(shape):
            raise _cai_error("'strides' %r do not match 'shape' %r" % (strides, shape))
        strides = tuple(_index(n, "'strides' entries") for n in strides)
        if any(not -_INTP_END < n < _INTP_END for n in strides):
            raise _cai_error("'strides' %r are larger than the address space" % (strides,))
    data = cai["data"]
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise _cai_error("'data' must be (pointer, read_only), not %r" % (data,))
    pointer = 0 if data[0] is None else _index(data[0], "the 'data' pointer")
    if not 0 <= pointer < _INTP_END:
        raise _cai_error("the 'data' pointer must be between 0 and 2**63-1, not %r" % (data[0],))
    stream = _cai_stream(cai.get("stream")) if version >= 3 else 0
    return _Described(pointer, shape, strides, dtype, bool(data[1]), stream or None)


def _from_dlpack(obj, consumer):
    dev_type, _ = obj.__dlpack_device__()
    if dev_type not in _DEVICE_TYPES:
        return None
    stream = 1 if consumer is None else consumer
    try:
        capsule = obj.__dlpack__(stream=stream, max_version=(1, 0))
    except TypeError:  # a producer of DLPack < 1.0
        capsule = obj.__dlpack__(stream=stream)
    name = _capsule_name(capsule)
    ptr = _capsule_pointer(capsule, name)
    readonly = False
    if name == b"dltensor_versioned":
        managed = _DLManagedTensorVersioned.from_address(ptr)
        tensor = managed.dl_tensor
        readonly = bool(managed.flags & _DL_FLAG_READ_ONLY)
    else:
        tensor = _DLTensor.from_address(ptr)
    dt = tensor.dtype
    if dt.lanes != 1 or dt.code not in _DL_KINDS:
        raise TypeError("DLPack dtype (code %d, %d bits, %d lanes) has no NumPy equivalent"
                        % (dt.code, dt.bits, dt.lanes))
    dtype = np.dtype("?" if dt.code == 6 else "%s%d" % (_DL_KINDS[dt.code], dt.bits // 8))
    ndim = tensor.ndim
    shape = [tensor.shape[i] for i in range(ndim)]
    strides = None if not tensor.strides else \
        [tensor.strides[i] * dtype.itemsize for i in range(ndim)]
    data = (tensor.data or 0) + tensor.byte_offset
    return _Described(data, shape, strides, dtype, readonly, keepalive=capsule)


def _numba_cuda_array_class():
    if _compat.simulator_enabled():
        return ()
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase

    return (DeviceNDArrayBase,)


def _declaring_classes():
    """numba-cuda's device array classes (simulated ones under the
    simulator): their objects declare their type with ``_numba_type_``."""
    if _compat.simulator_enabled():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        return (FakeCUDAArray,)
    return _numba_cuda_array_class()


def describe(obj):
    """Read a device array object (see the module docstring); None when it
    is not one."""
    consumer = None
    if isinstance(obj, on_stream):
        consumer = obj._consumer_stream()
        obj = obj.obj
    if isinstance(obj, np.ndarray) and not isinstance(obj, _numba_cuda_array_class()):
        return None
    cai = getattr(obj, "__cuda_array_interface__", None) \
        if not _compat.simulator_enabled() else None
    if cai is not None:
        desc = _from_cai(cai)
        return desc
    if _compat.simulator_enabled():
        return _from_simulator(obj)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return _from_dlpack(obj, consumer)
    return None


def _from_simulator(obj):
    """numba-cuda's simulated device arrays (host memory standing for device
    memory) and objects exposing the CUDA Array Interface under the
    simulator."""
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    if isinstance(obj, FakeCUDAArray):
        ary = obj._ary
        return _Described(ary.ctypes.data, ary.shape, ary.strides, ary.dtype,
                          not ary.flags.writeable)
    cai = getattr(obj, "__cuda_array_interface__", None)
    return _from_cai(cai) if cai is not None else None


def device_array_type(desc):
    """The :class:`DeviceArray` type of a described array (TypeError for a
    dtype Numba has no type for)."""
    try:
        dtype = numba.from_dtype(desc.dtype)
    except (NotImplementedError, NumbaError):
        raise TypeError("dtype %r has no Numba type" % (desc.dtype,)) from None
    return DeviceArray(dtype, len(desc.shape), desc.layout, desc.readonly)


_ITEMSIZE = {}  # typestr -> itemsize
_TYPES = {}  # (typestr, shape, strides, readonly) -> DeviceArray, for repeated calls
_KEEP = set()  # every type handed to the dispatcher (it keeps only their codes)


def _remember(key, ty):
    if len(_TYPES) > 4096:
        _TYPES.clear()
    _TYPES[key] = ty
    _KEEP.add(ty)
    return ty


def _itemsize(typestr):
    size = _ITEMSIZE.get(typestr)
    if size is None:
        size = _ITEMSIZE[typestr] = np.dtype(typestr).itemsize
    return size


def _cai_of(obj):
    """The CUDA Array Interface dict of *obj* (not under the simulator, and
    not of a plain NumPy array), or None."""
    if type(obj) is np.ndarray or _compat.simulator_enabled():
        return None
    return getattr(obj, "__cuda_array_interface__", None)


def _sync_enabled():
    """numba-cuda's ``NUMBA_CUDA_ARRAY_INTERFACE_SYNC`` setting, as it is now."""
    return getattr(_cuda_config, "CUDA_ARRAY_INTERFACE_SYNC", True)


def _stream_to_wait(stream):
    """The producer stream an array carries (launches on other streams wait
    for it): 0 for none, or when the setting is off."""
    return _cai_stream(stream) if stream is not None and _sync_enabled() else 0


def _fields_from_cai(cai, ndim):
    """``(data, itemsize, shape..., strides..., stream)`` from a CUDA Array
    Interface dict, or None if it is not one of *ndim* dimensions or not a
    plain one (then described, which says what is wrong)."""
    try:
        if cai.get("version", 0) < 2 or cai.get("mask") is not None:
            return None
        shape = tuple(cai["shape"])
        strides = cai.get("strides")
        if len(shape) != ndim or (strides is not None and len(strides) != ndim) or \
                min(shape, default=0) < 0:
            return None
        itemsize = _itemsize(cai["typestr"])
        strides = _c_strides(shape, itemsize) if strides is None else tuple(strides)
        pointer = cai["data"][0] or 0
        if not 0 <= pointer < _INTP_END:
            return None  # described: says what is wrong
        return (pointer, itemsize) + shape + strides + (_stream_to_wait(cai.get("stream")),)
    except (TypeError, ValueError, KeyError, AttributeError):
        return None


def _fields(obj, ndim):
    """Unboxing: ``(data, itemsize, shape..., strides..., stream)``, the
    stream being the producer's, which launches on other streams wait for
    (0: none). Read by the producer's own reader when it has one
    (:mod:`.producers`), else from its CUDA Array Interface dict, else
    described."""
    reader = _READERS.get(type(obj))
    if reader is not None:
        fields = reader(obj, ndim)
        if fields is not None:
            return fields
    cai = _cai_of(obj)
    if cai is not None:
        fields = _fields_from_cai(cai, ndim)
        if fields is not None:
            return fields
    desc = describe(obj)
    if desc is None or len(desc.shape) != ndim:
        raise TypeError("%r is no longer a %d-dimensional device array" % (obj, ndim))
    return (desc.data, desc.dtype.itemsize) + desc.shape + desc.strides + \
        (_stream_to_wait(desc.stream),)


set_describer(_fields)


def _c_strides(shape, itemsize):
    strides, step = [], itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


_DECLARED = {}  # numba-cuda's Array type of an object -> its DeviceArray type


def _typeof_declared(val):
    """numba-cuda (and simulated) device arrays: typed from the ``Array``
    they declare (``_numba_type_``, what kernels receive them as), never
    read-only. So the type is a function of the class and of the C typecode
    Numba's dispatcher computes, which its routers rely on
    (:mod:`..compat.numba_dispatcher`)."""
    declared = getattr(val, "_numba_type_", None)
    if not isinstance(declared, types.Array):
        return None  # a device record, say
    ty = _DECLARED.get(declared)
    if ty is None:
        ty = _DECLARED[declared] = DeviceArray(declared.dtype, declared.ndim,
                                               declared.layout, False)
        _KEEP.add(ty)
    return ty


def _typeof_device_array(val, c=None, cai=None):
    if isinstance(val, _declaring_classes()):
        ty = _typeof_declared(val)
        if ty is not None:
            return ty
    if cai is None:
        cai = _cai_of(val)
    if cai is not None:  # the common case: remember the type of this layout
        # (with the kinds of the pointer and the stream: a key typed once
        # was checked whole, so an entry of another kind is checked anew)
        data = cai.get("data", (0, False))
        key = (cai.get("typestr"), tuple(cai.get("shape", ())), cai.get("strides"),
               bool(data[1]), type(data[0]), cai.get("version", 0), type(cai.get("stream")))
        try:
            ty = _TYPES.get(key)
        except TypeError:  # an unhashable entry: no cache
            ty, key = None, None
        if ty is not None:
            return ty
        ty = device_array_type(_from_cai(cai))
        return ty if key is None else _remember(key, ty)
    desc = describe(val)
    if desc is None:
        return None
    ty = device_array_type(desc)
    _KEEP.add(ty)
    return ty


def _typeof_producer(val):
    """The type of *val* if it is a CUDA Array Interface or DLPack producer
    whose interface can be read, else None."""
    try:  # read once: may be costly; a producer may refuse (a tensor needing grad)
        cai = getattr(val, "__cuda_array_interface__", None)
    except Exception:
        cai = None
    if cai is None and not hasattr(val, "__dlpack__"):
        return None
    try:
        return _typeof_device_array(val, None, cai)
    except Exception:  # a producer whose interface cannot be read: not ours
        return None


def _typeof_unknown(val):
    """Device arrays and stream objects of classes met for the first time:
    the class then gets its fast typing function (:func:`_learn_class`)."""
    ty = _typeof_producer(val)
    if ty is not None:
        _learn_class(type(val), ty)
        return ty
    if is_stream_object(val):
        _learn_class(type(val), cuda_stream)
        return cuda_stream
    return None


def _learn_class(cls, ty):
    """Give *cls*, whose instance was just typed *ty*, a typing function the
    dispatcher calls directly (and a reader for unboxing, where its
    library has one)."""
    if cls in _LEARNT or _compat.simulator_enabled():
        return
    _LEARNT.add(cls)
    if ty is cuda_stream:
        learn_stream_class(cls)
        return
    read = _producers.fast_path(cls, _sync_enabled)
    if read is not None:
        register_typeof(cls, _keyed_typeof(read))
        _READERS[cls] = _fields_reader(read)
    else:
        register_typeof(cls, _typeof_producer)


_LEARNT = set()
_READERS = {}  # class -> fn(obj, ndim) -> fields or None


def _keyed_typeof(read):
    """Typing through the producer's cheap key (its dtype, shape and
    strides, say): a key seen before gives its type without the interface
    dict. The fields read with the key wait for this call's unboxing
    (:data:`TYPED_FIELDS`)."""
    stash, ref, ident = TYPED_FIELDS, weakref.ref, threading.get_ident

    def typeof(val):
        k, fields = read(val)
        ty = _TYPES.get(k)
        if ty is None:
            ty = _typeof_unknown(val)
            if ty is None:
                stash.pop(id(val), None)
                return None
            _remember(k, ty)
        if fields is None:
            stash.pop(id(val), None)  # no stale entry for this object
        else:
            if len(stash) > 256:  # entries of objects since gone
                stash.clear()
            stash[id(val)] = (ref(val), ident(), fields)
        return ty
    return typeof


def _fields_reader(read):
    """The unboxing reader (``fn(obj, ndim)``) of a producer's ``read``,
    for unboxing that finds no fields from typing."""
    def reader(val, ndim):
        fields = read(val)[1]
        return fields if fields is not None and len(fields) == 3 + 2 * ndim else None
    return reader


def why_not_a_device_array(val):
    """Why an object that offers a device-array interface cannot be passed
    as one (its interface raised, or says something unusable), or None."""
    if isinstance(val, on_stream) and not _compat.simulator_enabled():
        inner = val.obj
        if isinstance(inner, np.ndarray) and not isinstance(inner, _numba_cuda_array_class()):
            return "on_stream() wraps a device array; it was given a NumPy array (host memory)"
        if not (hasattr(inner, "__cuda_array_interface__") or hasattr(inner, "__dlpack__")):
            return ("on_stream() wraps a device array (an object with __cuda_array_interface__ "
                    "or __dlpack__); it was given %s" % type(inner).__name__)
        return why_not_a_device_array(inner)
    if isinstance(val, np.ndarray) or _compat.simulator_enabled():
        return None
    try:
        cai = getattr(val, "__cuda_array_interface__", None)
    except Exception as e:
        return "reading its __cuda_array_interface__ raised %s: %s" % (type(e).__name__, e)
    try:
        if cai is not None:
            device_array_type(_from_cai(cai))
        elif hasattr(val, "__dlpack__") and hasattr(val, "__dlpack_device__"):
            device = tuple(val.__dlpack_device__())
            if device[0] not in _DEVICE_TYPES:
                return ("its DLPack device %r is not a CUDA device (device types %s: "
                        "CUDA, CUDA host, CUDA managed memory)" % (device, _DEVICE_TYPES))
            desc = describe(val)
            if desc is not None:
                device_array_type(desc)
    except Exception as e:
        return "%s is not a usable device array: %s" % (type(val).__name__, e)
    return None


def _route(value, ty):
    """Which arguments the dispatcher routes by class (see
    :mod:`..compat.numba_dispatcher`): numba-cuda's device arrays."""
    return isinstance(ty, DeviceArray) and isinstance(value, _declaring_classes())


def _guard(cres):
    """The host-array positions of a newly compiled overload that uses CUDA:
    numba-cuda's arrays given there reach C as host arrays (see
    :mod:`..compat.numba_dispatcher`). Other functions are left alone."""
    if not _declaring_classes() or not has_reload_checks(cres):
        return ()
    return tuple(i for i, t in enumerate(cres.signature.args) if isinstance(t, types.Array))


def _register():
    for cls in _numba_cuda_array_class() + (on_stream,):
        typeof_impl.register(cls)(_typeof_device_array)
    if _compat.simulator_enabled():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

        typeof_impl.register(FakeCUDAArray)(_typeof_device_array)
    else:
        classes = _compat.numba_cuda_array_classes()
        for cls in classes:
            register_typeof(cls, _typeof_declared)
        _producers.install_numba_cuda_readers(_READERS, _sync_enabled, classes, CACHED_FIELDS)
        set_cached_classes(classes)
    # Before Numba's generic typeof, which tries the buffer protocol (some
    # device arrays refuse it with an error).
    type_unknown_objects_with(_typeof_unknown)
    route_numba_type_mismatches(_route, _guard)
    explain_argument_errors(why_not_a_device_array)


_register()
