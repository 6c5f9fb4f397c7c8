"""Fast readers for the device arrays of CuPy, PyTorch and numba-cuda: the
type key and the fields a call needs, read from their attributes instead
of building their ``__cuda_array_interface__`` dict (about a microsecond
each) at typing and again at unboxing. Fields are what
:func:`.unbox.read_fields` returns, or None to read the interface. See
``docs/devicearrays.md``; ``tests/test_devicearray_gpu.py`` checks them.
"""

from numba_cuda_launch.compat.overrides import set_instance_attribute
from numba_cuda_launch.launch.devicearray.readers import sync_enabled as _sync_enabled
from numba_cuda_launch.launch.devicearray.unbox import CACHED_FIELDS

__all__ = ["fast_path", "read_numba_cuda"]


def _cupy_read(sync_enabled):
    """CuPy's ndarray: its key, and its pointer, shape, strides and the
    stream its ``__cuda_array_interface__`` names: none (0) with export
    version 2 or with synchronisation off, else CuPy's current stream, the
    default stream's handle (1, or 2 per-thread) standing for 0; fields None
    for another export version (read the interface)."""
    import cupy
    from cupy import _util
    from cupy_backends.cuda import stream as backend_stream

    current, default = cupy.cuda.get_current_stream, backend_stream.get_default_stream_ptr

    def read(val):
        shape, strides = val.shape, val.strides
        key = (type(val), val.dtype, shape, strides)
        version = getattr(_util, "CUDA_ARRAY_INTERFACE_EXPORT_VERSION", 3)
        if version == 3:
            stream = (current().ptr or default()) if sync_enabled() else 0
        elif version == 2:
            stream = 0
        else:
            return key, None
        return key, (val.data.ptr if val.size else 0, val.itemsize) + shape + strides + (stream,)
    return read


def _torch_read(val):
    shape, stride = tuple(val.shape), val.stride()
    key = (type(val), val.dtype, shape, stride, val.is_cuda, val.requires_grad, val.layout)
    if not val.is_cuda:
        return key, None
    itemsize = val.element_size()
    strides = tuple(s * itemsize for s in stride)
    ptr = val.data_ptr() if val.numel() else 0
    return key, (ptr, itemsize) + shape + strides + (0,)  # CAI version 2: no stream


def fast_path(cls, sync_enabled):
    """``read(obj) -> (key, fields)`` for device arrays of *cls* (CuPy's
    ndarray, PyTorch's Tensor), or None: *key* decides the type (the class,
    dtype, shape, strides, ...), *fields* are what :func:`.unbox.read_fields`
    returns (None: read the interface)."""
    module, name = (getattr(cls, "__module__", "") or "").split(".")[0], cls.__name__
    if module == "cupy" and name == "ndarray":
        return _cupy_read(sync_enabled)
    if module == "torch" and ("Tensor" in name or "Parameter" in name):
        return _torch_read
    return None


def read_numba_cuda(val, ndim):
    """The reader (:data:`.unbox.READERS`) of numba-cuda's device arrays: the
    CAI stream is the array's stream when it is not 0. An array with no
    stream keeps its fields in :data:`.unbox.CACHED_FIELDS` (its memory,
    shape and strides never change), which compiled unboxing reads without
    calling back."""
    shape = val.shape
    if len(shape) != ndim:
        return None
    stream = val.stream
    handle = int(stream) if stream != 0 else 0
    ptr = val.device_ctypes_pointer.value or 0
    fields = (ptr, val.dtype.itemsize) + tuple(shape) + tuple(val.strides)
    # With a stream the reader runs at each call (the sync setting may
    # change); None says so to compiled code without a missing attribute.
    set_instance_attribute(val, CACHED_FIELDS, (stream, None if handle else fields + (0,)))
    if handle and not _sync_enabled():
        handle = 0
    return fields + (handle,)
