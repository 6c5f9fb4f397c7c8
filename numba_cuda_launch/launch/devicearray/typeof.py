"""Typing device array objects passed into compiled functions: numba-cuda's
arrays from the ``Array`` they declare, other producers from what
:mod:`.readers` reads (remembered by layout, or by a cheap key through
:mod:`.fastpaths`); a class met for the first time gets a typing function
Numba's dispatcher calls directly. See ``docs/devicearrays.md``.
"""

import threading
import weakref
from types import SimpleNamespace

from numba.core import types
from numba.core.typing.typeof import typeof_impl

from numba_cuda_launch.compat.numba_caching import has_reload_checks
from numba_cuda_launch.compat.numba_dispatcher import register_typeof, route_arguments_with, \
    type_unknown_objects_with
from numba_cuda_launch.launch.devicearray import fastpaths
from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.devicearray.readers import cai_layout, declaring_classes, \
    describe, device_array_type, keep_type, on_stream, read_cai, read_dlpack, remember, \
    sync_enabled, why_not_a_device_array
from numba_cuda_launch.launch.devicearray.unbox import READERS, TYPED_FIELDS
from numba_cuda_launch.launch.stream import cuda_stream, is_stream_object, learn_stream_class

__all__ = ["ARGUMENT_TYPING"]


class _TypeCache:
    """The types of the declared arrays and of the keys seen, kept alive
    (:func:`.readers.keep_type`)."""

    def __init__(self):
        self.by_key, self.by_declared = {}, {}

    def remember(self, key, ty):
        return keep_type(remember(self.by_key, key, ty))


TYPES = _TypeCache()


def _typeof_declared(val):
    """numba-cuda (and simulated) device arrays: typed from the ``Array``
    they declare (``_numba_type_``, what kernels receive them as), never
    read-only. So the type is a function of the class and of the C typecode
    Numba's dispatcher computes, which its routers rely on
    (:mod:`..compat.numba_dispatcher`)."""
    declared = getattr(val, "_numba_type_", None)
    if not isinstance(declared, types.Array):
        return None  # a device record, say
    ty = TYPES.by_declared.get(declared)
    if ty is None:
        ty = TYPES.by_declared[declared] = keep_type(
            DeviceArray(declared.dtype, declared.ndim, declared.layout, False))
    return ty


def _typeof_device_array(val, c):
    if isinstance(val, declaring_classes()):
        ty = _typeof_declared(val)
        if ty is not None:
            return ty
    if not BACKEND.device_memory:  # the backend's own reading of host memory
        desc = describe(val)
        return None if desc is None else keep_type(device_array_type(desc))
    cai = read_cai(val.obj if isinstance(val, on_stream) else val)
    return _typeof_cai(cai) if cai is not None else _typeof_dlpack(val)


def _typeof_cai(cai):
    """The type a CUDA Array Interface dict says (its layout's, read by
    :func:`.readers.cai_layout`)."""
    return cai_layout(cai).type()


def _typeof_dlpack(val):
    """A DLPack producer's type, its tensor released at once (None where
    kernels run on host memory)."""
    found = read_dlpack(val) if BACKEND.device_memory else None
    return None if found is None else found[0].type()


def _typeof_dlpack_argument(val):
    """A DLPack producer, or :class:`.readers.on_stream` of one, typed for
    a call: its tensor, read once, waits for the call's unboxing
    (:meth:`.unbox.TypedFields.keep_owned`), which releases it when the call
    returns. None when *val* is not one."""
    found = read_dlpack(val)
    if found is None:
        return None
    layout, data, owner = found
    ty = layout.type()
    TYPED_FIELDS.keep_owned(val, (data,) + layout.sizes + (0, owner))
    return ty


def _producer_typeof(typeof_dlpack):
    """The typing of CUDA Array Interface and DLPack producers (the latter
    by *typeof_dlpack*): None for an object that is not one, or whose
    interface cannot be read."""
    def typeof(val):
        try:  # read once: may be costly; a producer may refuse (a tensor needing grad)
            cai = read_cai(val)
        except Exception:
            return None  # read again, it would raise again
        try:
            if cai is not None:
                return _typeof_cai(cai)
            return typeof_dlpack(val) if hasattr(val, "__dlpack__") else None
        except Exception:  # a producer whose interface cannot be read: not ours
            return None
    return typeof


_typeof_producer = _producer_typeof(_typeof_dlpack)
# The dispatcher's typing of a call's arguments (of a class learnt: neither
# numba-cuda's nor under the simulator): a DLPack tensor is read once for the call.
_typeof_producer_argument = _producer_typeof(_typeof_dlpack_argument)


def _typeof_on_stream_argument(val):
    """An :class:`.readers.on_stream` argument (errors raised, as Numba's
    ``typeof`` raises them)."""
    cai = read_cai(val.obj)  # (not under the simulator: see _register)
    return _typeof_cai(cai) if cai is not None else _typeof_dlpack_argument(val)


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


_LEARNT = set()


def _learn_class(cls, ty):
    """Give *cls*, whose instance was just typed *ty*, a typing function the
    dispatcher calls directly (and a reader for unboxing, where its
    library has one)."""
    if cls in _LEARNT or not BACKEND.device_memory:
        return
    _LEARNT.add(cls)
    if ty is cuda_stream:
        learn_stream_class(cls)
        return
    read = fastpaths.fast_path(cls, sync_enabled)
    if read is not None:
        register_typeof(cls, _keyed_typeof(read))
        READERS[cls] = _fields_reader(read)
    else:
        register_typeof(cls, _typeof_producer_argument)


def _keyed_typeof(read):
    """Typing through the producer's cheap key (its dtype, shape and
    strides, say): a key seen before gives its type without the interface
    dict. The fields read with the key wait for this call's unboxing
    (:data:`.unbox.TYPED_FIELDS`)."""
    forget, by_key = TYPED_FIELDS.forget, TYPES.by_key
    entries, limit, ref, ident = TYPED_FIELDS.entries, TYPED_FIELDS._LIMIT, weakref.ref, \
        threading.get_ident

    def typeof(val):
        k, fields = read(val)
        ty = by_key.get(k)
        if ty is None:
            ty = _typeof_unknown(val)
            if ty is None:
                forget(val)
                return None
            TYPES.remember(k, ty)
        if fields is None:
            forget(val)  # no stale entry for this object
            return ty
        if len(entries) > limit:  # entries are kept inline here: this runs at every call
            entries.clear()
        entries[id(val)] = (ref(val), ident(), fields)
        return ty
    return typeof


def _fields_reader(read):
    """The unboxing reader (``fn(obj, ndim)``) of a producer's ``read``,
    for unboxing that finds no fields from typing."""
    def reader(val, ndim):
        fields = read(val)[1]
        return fields if fields is not None and len(fields) == 3 + 2 * ndim else None
    return reader


def _route(value, ty):
    """numba-cuda's device arrays are routed by class."""
    return isinstance(ty, DeviceArray) and isinstance(value, declaring_classes())


def _guard(cres):
    """The host-array positions of a newly compiled overload that uses CUDA:
    numba-cuda's arrays given there reach C as host arrays. Other functions
    are left alone."""
    if not declaring_classes() or not has_reload_checks(cres):
        return ()
    return tuple(i for i, t in enumerate(cres.signature.args) if isinstance(t, types.Array))


#: What Numba's dispatcher asks about the arguments of a call (see
#: :func:`..compat.numba_dispatcher.route_arguments_with`).
ARGUMENT_TYPING = SimpleNamespace(should_route=_route, guard=_guard,
                                  explain=why_not_a_device_array,
                                  release=TYPED_FIELDS.release)


def _register_arrays(streams, arrays, fast_arrays):
    """The backend's own device array classes (numba-cuda's, once it is
    imported)."""
    for cls in arrays:
        typeof_impl.register(cls)(_typeof_device_array)
    for cls in fast_arrays:
        register_typeof(cls, _typeof_declared)
        READERS[cls] = fastpaths.read_numba_cuda


def _register():
    typeof_impl.register(on_stream)(_typeof_device_array)
    BACKEND.on_python_classes(_register_arrays)
    if BACKEND.device_memory:
        register_typeof(on_stream, _typeof_on_stream_argument)
    # Before Numba's generic typeof, which tries the buffer protocol (some
    # device arrays refuse it with an error).
    type_unknown_objects_with(_typeof_unknown)
    route_arguments_with(ARGUMENT_TYPING)


_register()
