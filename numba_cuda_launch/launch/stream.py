"""Stream objects (numba-cuda's ``Stream``, CuPy's, PyTorch's, cuda.core's
``__cuda_stream__``) passed to nopython functions: a :class:`CUDAStream`
value holding the raw ``CUstream``, usable as a launch's stream as a raw
handle (``voidptr`` or integer) is.
"""

import operator
from typing import Any, TypeAlias

import numpy as np

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import (
    NativeValue,
    lower_cast,
    make_attribute_wrapper,
    models,
    register_model,
    typeof_impl,
    unbox,
)

from numba_cuda_launch.compat.numba_dispatcher import register_typeof
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.pyobjects import python_object

__all__ = ["CUDAStream", "cuda_stream", "stream_handle", "python_stream", "is_stream_object",
           "learn_stream_class", "Stream"]

#: A stream, as the public functions take one: a stream object (numba-cuda's
#: ``Stream``, CuPy's, PyTorch's, one with ``__cuda_stream__``) or a raw
#: ``CUstream`` integer (0: the default stream); these share no base class.
Stream: TypeAlias = Any


class CUDAStream(types.Type):
    """The type of a numba-cuda ``Stream`` in CPU nopython code."""

    def __init__(self):
        super().__init__(name="CUDAStream")


cuda_stream = CUDAStream()


@register_model(CUDAStream)
class CUDAStreamModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("handle", types.voidptr)])


make_attribute_wrapper(CUDAStream, "handle", "handle")


def _foreign_stream_attribute_of_class(cls):
    """The attribute holding the raw handle of a CuPy (``ptr``) or PyTorch
    (``cuda_stream``) stream class, recognised without importing either."""
    module = getattr(cls, "__module__", "") or ""
    if module.startswith("cupy") and "Stream" in cls.__name__:
        return "ptr"
    if module.startswith("torch.cuda"):
        return "cuda_stream"
    return None


def _foreign_stream_attribute(obj):
    attr = _foreign_stream_attribute_of_class(type(obj))
    return attr if attr is not None and hasattr(obj, attr) else None


def is_stream_object(obj):
    """True for objects typed as :class:`CUDAStream` (numba-cuda's are
    registered by class)."""
    return hasattr(obj, "__cuda_stream__") or _foreign_stream_attribute(obj) is not None


_HANDLE_END = 1 << 64


def _checked_handle(value, what):
    """*value* as a ``CUstream`` handle: an integer in 0..2**64-1 (not a
    bool, never a truncated float), else TypeError naming *what* gave it."""
    if type(value) is int and 0 <= value < _HANDLE_END:
        return value
    try:
        if isinstance(value, bool) or type(value).__name__ == "bool_":
            raise TypeError
        handle = operator.index(value)
    except TypeError:
        raise TypeError("%s must be an integer stream handle, not %r" % (what, value)) from None
    if not 0 <= handle < _HANDLE_END:
        raise TypeError("%s must be a stream handle between 0 and 2**64-1, not %r"
                        % (what, value))
    return handle


def stream_handle(obj):
    """The raw ``CUstream`` (an integer, 0 for the default stream) of a stream
    object or an integer handle (the backend's own streams: its
    :meth:`~..backends.LaunchBackend.stream_handle`). Anything else, or a
    handle outside 0..2**64-1, is a TypeError."""
    if isinstance(obj, BACKEND.stream_classes()):
        return BACKEND.stream_handle(obj)
    proto = getattr(obj, "__cuda_stream__", None)
    if proto is not None:
        what = "%s.__cuda_stream__()" % type(obj).__name__
        if not callable(proto):
            raise TypeError("%s.__cuda_stream__ must be a method returning (version, handle), "
                            "not %r" % (type(obj).__name__, proto))
        info = proto()
        if not isinstance(info, tuple) or len(info) != 2:
            raise TypeError("%s must return (version, handle); it returned %r" % (what, info))
        return _checked_handle(info[1], "the handle %s returned" % what)
    attr = _foreign_stream_attribute(obj)
    if attr is not None:
        return _checked_handle(getattr(obj, attr), "%s.%s" % (type(obj).__name__, attr))
    return _checked_handle(obj, "a stream")


def python_stream(stream):
    """A stream given to a Python form, as compiled code takes it: None and
    the backend's own streams (numba-cuda's) as they are, anything else as
    its raw handle."""
    if stream is None or isinstance(stream, BACKEND.stream_classes()):
        return stream
    # An integer is checked as a stream object's handle; one above int64
    # crosses into compiled code as uint64.
    handle = stream_handle(stream)
    return handle if handle < (1 << 63) else np.uint64(handle)


_HANDLES = {}  # stream class -> fn(stream) -> raw handle, for unboxing


def learn_stream_class(cls):
    """Give *cls* (a stream class met in a call) fast typing and unboxing."""
    attr = _foreign_stream_attribute_of_class(cls)
    if attr is not None:
        _HANDLES.setdefault(cls, operator.attrgetter(attr))
    register_typeof(cls, lambda val: cuda_stream if is_stream_object(val) else None)


def _unbox_handle(obj):
    fn = _HANDLES.get(type(obj))
    if fn is None:
        return stream_handle(obj)
    handle = fn(obj)
    if type(handle) is int and 0 <= handle < _HANDLE_END:
        return handle
    return stream_handle(obj)  # says what is wrong with it


def _register_streams(streams, arrays, fast_arrays):
    """The backend's own stream classes (numba-cuda's, once it is imported)."""
    for cls in streams:
        typeof_impl.register(cls)(lambda val, c: cuda_stream)
        register_typeof(cls, lambda val: cuda_stream)
        _HANDLES[cls] = BACKEND.stream_handle


BACKEND.on_python_classes(_register_streams)


@unbox(CUDAStream)
def _unbox_stream(typ, obj, c):
    out = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    out.handle = ir.Constant(ir.IntType(8).as_pointer(), None)
    get_handle = python_object(c, _unbox_handle, "numba_cuda_launch.stream_handle")
    with c.builder.if_then(cgutils.is_not_null(c.builder, get_handle), likely=True):
        as_int = c.pyapi.call_function_objargs(get_handle, [obj])
        with c.builder.if_then(cgutils.is_not_null(c.builder, as_int), likely=True):
            out.handle = c.pyapi.long_as_voidptr(as_int)
            c.pyapi.decref(as_int)
    return NativeValue(out._getvalue(), is_error=c.pyapi.c_api_error())


@lower_cast(CUDAStream, types.voidptr)
def _stream_to_voidptr(context, builder, fromty, toty, val):
    return cgutils.create_struct_proxy(fromty)(context, builder, value=val).handle
