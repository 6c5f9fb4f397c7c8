"""Fast paths for the device arrays of numba-cuda, CuPy and PyTorch.

A call of a compiled function from Python types and unboxes each device
array argument. Through the CUDA Array Interface that means building the
producer's interface dict twice per argument (about a microsecond each for
CuPy and PyTorch). For the libraries below, the same facts are read from
their attributes instead:

* typing: a cheap key (the class, dtype, shape and strides, and what else
  decides the type) that was typed through the interface once;
* unboxing: the pointer, shape and strides, and the stream the interface
  would name (CuPy: its current stream, as its ``__cuda_array_interface__``
  says; numba-cuda: the array's stream; PyTorch: none, its interface is
  version 2).

For CuPy and PyTorch one read gives both, when the argument is typed (the
fields wait in :data:`.unbox.TYPED_FIELDS` for the call's unboxing). Fields
are what :func:`.unbox.read_fields` returns, or None to let the interface be
read. ``tests/test_devicearray_gpu.py`` checks every reader against the
producer's own interface (see ``docs/devicearrays.md``).
"""

from numba_cuda_launch.compat.overrides import set_instance_attribute

__all__ = ["fast_path", "install_numba_cuda_readers"]


def _module(cls):
    return (getattr(cls, "__module__", "") or "").split(".")[0]


# -- CuPy ------------------------------------------------------------------------------

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


# -- PyTorch ---------------------------------------------------------------------------

def _torch_read(sync_enabled):
    def read(val):
        shape, stride = tuple(val.shape), val.stride()
        key = (type(val), val.dtype, shape, stride, val.is_cuda, val.requires_grad, val.layout)
        if not val.is_cuda:
            return key, None
        itemsize = val.element_size()
        strides = tuple(s * itemsize for s in stride)
        ptr = val.data_ptr() if val.numel() else 0
        return key, (ptr, itemsize) + shape + strides + (0,)  # CAI version 2: no stream
    return read


_FAST = {"cupy": _cupy_read, "torch": _torch_read}


def fast_path(cls, sync_enabled):
    """``read(obj) -> (key, fields)`` for device arrays of *cls* (CuPy's
    ndarray, PyTorch's Tensor), or None: *key* decides the type (the class,
    dtype, shape, strides, ...), *fields* are what :func:`.unbox.read_fields`
    returns (None: read the interface)."""
    fast = _FAST.get(_module(cls))
    if fast is None:
        return None
    name = cls.__name__
    if (_module(cls) == "cupy" and name != "ndarray") or \
            (_module(cls) == "torch" and "Tensor" not in name and "Parameter" not in name):
        return None
    return fast(sync_enabled)


# -- numba-cuda ------------------------------------------------------------------------

def install_numba_cuda_readers(readers, sync_enabled, classes, cache_attribute):
    """Readers for numba-cuda's device array *classes* (the CAI stream is
    the array's stream when it is not 0). An array with no stream keeps its
    fields in *cache_attribute* (its memory, shape and strides never change),
    which compiled unboxing reads without calling back
    (:func:`.unbox._cached_fields`)."""
    def read(val, ndim):
        shape = val.shape
        if len(shape) != ndim:
            return None
        stream = val.stream
        handle = int(stream) if stream != 0 else 0
        ptr = val.device_ctypes_pointer.value or 0
        fields = (ptr, val.dtype.itemsize) + tuple(shape) + tuple(val.strides)
        # With a stream the reader runs at each call (the sync setting may
        # change); None says so to compiled code without a missing attribute.
        set_instance_attribute(val, cache_attribute, (stream, None if handle else fields + (0,)))
        if handle and not sync_enabled():
            handle = 0
        return fields + (handle,)

    for cls in classes:
        readers[cls] = read
