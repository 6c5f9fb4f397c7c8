"""TVM-FFI tensors over host memory that say they are on a CUDA device, for
calling TVM-FFI functions on the CPU under the recording driver: a DLPack
capsule built with ctypes (no deleter: the memory is kept here for the
process) and handed to ``tvm_ffi.from_dlpack``."""

import ctypes

import numpy as np

_vp = ctypes.c_void_p
_KEEP = []  # what the tensors point to, for the life of the process
_DL_CODES = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", _vp), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", _vp), ("deleter", _vp)]


_capsule_new = ctypes.PYFUNCTYPE(ctypes.py_object, _vp, ctypes.c_char_p, _vp)(
    ("PyCapsule_New", ctypes.pythonapi))


def cuda_tensor(a, device=(2, 0), dl_dtype=None, byte_offset=0, data=None):
    """A ``tvm_ffi.Tensor`` over NumPy array *a*'s memory (its strides kept:
    pass a view for a strided tensor) claiming DLPack *device*
    ``(type, id)``; *dl_dtype* ``(code, bits, lanes)`` and *byte_offset*
    override the tensor's. Writes by a kernel land in *a*."""
    import tvm_ffi

    shape = (ctypes.c_int64 * max(a.ndim, 1))(*a.shape)
    strides = (ctypes.c_int64 * max(a.ndim, 1))(*(s // a.itemsize for s in a.strides))
    code, bits, lanes = dl_dtype or (_DL_CODES[a.dtype.kind], 8 * a.itemsize, 1)
    address = a.__array_interface__["data"][0] if data is None else data
    managed = _DLManagedTensor(_DLTensor(address, _DLDevice(*device), a.ndim,
                                         _DLDataType(code, bits, lanes), shape, strides,
                                         byte_offset), None, None)
    _KEEP.append((a, shape, strides, managed))
    return tvm_ffi.from_dlpack(_capsule_new(ctypes.addressof(managed), b"dltensor", None))
