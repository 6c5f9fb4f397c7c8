"""Fake device-array producers and stream objects over host memory, for
CPU tests of every kernel source: the CUDA Array Interface, DLPack, a
CuPy-like stream and a ``__cuda_stream__`` one."""


class CAI:
    """A producer exposing ``__cuda_array_interface__`` over host memory."""

    def __init__(self, a, version=3, stream=None, readonly=False, contiguous_strides=True):
        self.a = a
        strides = a.strides
        if a.flags.c_contiguous and not contiguous_strides:
            strides = None  # CAI: None means C-contiguous
        self.__cuda_array_interface__ = dict(
            shape=a.shape, strides=strides, typestr=a.dtype.str,
            data=(a.ctypes.data, readonly), version=version)
        if version >= 3:
            self.__cuda_array_interface__["stream"] = stream


class DLPackOnDevice:
    """A DLPack producer over host memory that says it is on a CUDA device
    (NumPy writes the capsule)."""

    def __init__(self, a):
        self.a = a
        self.streams = []

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA

    def __dlpack__(self, stream=None, max_version=None, **kw):
        self.streams.append(stream)
        return self.a.__dlpack__(max_version=max_version) if max_version else self.a.__dlpack__()


class CupyLikeStream:
    __module__ = "cupy.cuda.stream"

    def __init__(self, ptr):
        self.ptr = ptr


CupyLikeStream.__name__ = "Stream"


class ProtocolStream:
    def __init__(self, handle):
        self.handle = handle

    def __cuda_stream__(self):
        return (0, self.handle)
