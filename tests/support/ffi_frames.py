"""XLA FFI call frames built in memory (ctypes), laid out as c_api.h says, to
call handlers without XLA."""

import ctypes

import numpy as np

from numba_cuda_launch import xla_ffi

_vp = ctypes.c_void_p
_i64 = ctypes.c_int64


class ByteSpan(ctypes.Structure):
    _fields_ = [("ptr", ctypes.c_char_p), ("len", ctypes.c_size_t)]


class Scalar(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("value", _vp)]


class Array(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int), ("size", ctypes.c_size_t), ("data", _vp)]


class Buffer(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("dtype", ctypes.c_int),
                ("data", _vp), ("rank", _i64), ("dims", ctypes.POINTER(_i64))]


class Items(ctypes.Structure):  # XLA_FFI_Args / XLA_FFI_Rets
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("size", _i64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("items", ctypes.POINTER(_vp))]


class Attrs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("size", _i64),
                ("types", ctypes.POINTER(ctypes.c_int)), ("names", ctypes.POINTER(_vp)),
                ("attrs", ctypes.POINTER(_vp))]


class CallFrame(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("api", _vp), ("ctx", _vp),
                ("stage", ctypes.c_int), ("args", Items), ("rets", Items), ("attrs", Attrs),
                ("future", _vp)]


class ApiVersion(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("major", ctypes.c_int),
                ("minor", ctypes.c_int)]


class Api(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("version", ApiVersion),
                ("internal", _vp), ("error_create", _vp), ("error_get_message", _vp),
                ("error_destroy", _vp), ("handler_register", _vp), ("stream_get", _vp)]


class ExtensionBase(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("type", ctypes.c_int), ("next", _vp)]


class Metadata(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("version", ApiVersion),
                ("traits", ctypes.c_uint32)]


class MetadataExtension(ctypes.Structure):
    _fields_ = [("base", ExtensionBase), ("metadata", ctypes.POINTER(Metadata))]


class StreamGetArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("ctx", _vp), ("stream", _vp)]


class ErrorCreateArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("message", ctypes.c_char_p),
                ("errc", ctypes.c_int)]


class ScalarAttr:
    """A scalar attribute given by its ``XLA_FFI_DataType`` code and raw
    bytes, for types NumPy or XLA do not produce (F16 and BF16 attributes,
    unknown codes). The bytes are followed by 0xA5 filler up to 8, so a
    reader that reads past the value's width gets garbage."""

    def __init__(self, code, raw):
        self.code, self.raw = code, bytes(raw)


class ErrorDestroyArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t), ("ext", _vp), ("error", _vp)]


_ERR_T = ctypes.CFUNCTYPE(_vp, ctypes.POINTER(ErrorCreateArgs))
_DESTROY_T = ctypes.CFUNCTYPE(None, ctypes.POINTER(ErrorDestroyArgs))
_STREAM_T = ctypes.CFUNCTYPE(_vp, ctypes.POINTER(StreamGetArgs))


class FakeXla:
    """An API table whose Error_Create records messages and whose Stream_Get
    returns *stream*, or, with *stream* None, fails as on XLA:CPU (its error
    is recorded in ``stream_errors``; Error_Destroy records in ``destroyed``)."""

    def __init__(self, stream=0x5EED, version=(0, 1)):
        self.errors, self.stream_errors, self.destroyed = [], [], []
        self.stream = stream
        self._err = _ERR_T(self._error_create)
        self._destroy = _DESTROY_T(self._error_destroy)
        self._stream = _STREAM_T(self._stream_get)
        self.api = Api(ctypes.sizeof(Api), None, ApiVersion(24, None, *version), None,
                       ctypes.cast(self._err, _vp), None, ctypes.cast(self._destroy, _vp), None,
                       ctypes.cast(self._stream, _vp))

    def _error_create(self, args):
        self.errors.append((args.contents.message.decode(), args.contents.errc))
        return 0xE000 + len(self.errors)

    def _error_destroy(self, args):
        self.destroyed.append((args.contents.struct_size, args.contents.error))

    def _stream_get(self, args):
        if self.stream is None:
            self.stream_errors.append(0x5E000 + len(self.stream_errors))
            return self.stream_errors[-1]
        args.contents.stream = self.stream
        return None


class Frame:
    """A call frame with buffers and attributes, kept alive with its parts."""

    def __init__(self, xla, args=(), rets=(), attrs=None, stage=xla_ffi.STAGE_EXECUTE,
                 metadata=False):
        self._keep = [xla]  # its API table: a frame given an XLA inline outlives it
        self.frame = CallFrame()
        self.frame.struct_size = ctypes.sizeof(CallFrame)
        self.frame.api = ctypes.addressof(xla.api) if xla is not None else None
        self.frame.stage = stage
        self.frame.args = self._items(args)
        self.frame.rets = self._items(rets)
        self.frame.attrs = self._attrs(attrs or {})
        if metadata:
            self.metadata = Metadata(ctypes.sizeof(Metadata), ApiVersion(24, None, 0, 0), 0)
            self.ext = MetadataExtension(ExtensionBase(32, 1, None), ctypes.pointer(self.metadata))
            self.frame.ext = ctypes.addressof(self.ext)

    @property
    def address(self):
        return ctypes.addressof(self.frame)

    def _buffer(self, data_ptr, shape, dtype):
        dims = (_i64 * max(1, len(shape)))(*shape)
        buf = Buffer(ctypes.sizeof(Buffer), None, xla_ffi.dtype_code(dtype), data_ptr,
                     len(shape), dims)
        self._keep += [dims, buf]
        return ctypes.addressof(buf)

    def _items(self, items):
        bufs = [self._buffer(*item) for item in items]
        types = (ctypes.c_int * max(1, len(bufs)))(*([1] * len(bufs)))
        ptrs = (_vp * max(1, len(bufs)))(*bufs)
        self._keep += [types, ptrs]
        return Items(ctypes.sizeof(Items), None, len(bufs), types, ptrs)

    def _attrs(self, attrs):
        names, types, values = [], [], []
        for name in sorted(attrs):
            value = attrs[name]
            raw = name.encode()
            span = ByteSpan(raw, len(raw))
            self._keep += [raw, span]
            names.append(ctypes.addressof(span))
            if isinstance(value, str):
                data = value.encode()
                obj = ByteSpan(data, len(data))
                self._keep.append(data)
                types.append(4)
            elif isinstance(value, ScalarAttr):
                data = ctypes.create_string_buffer(
                    value.raw + b"\xa5" * max(0, 8 - len(value.raw)), max(8, len(value.raw)))
                obj = Scalar(value.code, ctypes.addressof(data))
                self._keep.append(data)
                types.append(3)
            elif isinstance(value, np.ndarray):
                obj = Array(xla_ffi.dtype_code(value.dtype), value.size, value.ctypes.data)
                self._keep.append(value)
                types.append(1)
            else:
                arr = np.array([value])
                obj = Scalar(xla_ffi.dtype_code(arr.dtype), arr.ctypes.data)
                self._keep.append(arr)
                types.append(3)
            self._keep.append(obj)
            values.append(ctypes.addressof(obj))
        n = max(1, len(names))
        t = (ctypes.c_int * n)(*types)
        nm = (_vp * n)(*names)
        v = (_vp * n)(*values)
        self._keep += [t, nm, v]
        return Attrs(ctypes.sizeof(Attrs), None, len(names), t, nm, v)
