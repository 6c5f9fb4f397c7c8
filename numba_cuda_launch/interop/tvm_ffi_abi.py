"""TVM-FFI functions from nopython code: read a call's arguments, raise its errors
(docs/tvm-ffi.md, "Writing a function by hand").

A TVM-FFI function is ``@cfunc(int32(voidptr, voidptr, int32, voidptr))``:
``int f(void *self, const TVMFFIAny *args, int32_t num_args, TVMFFIAny *result)``,
0 on success; on failure it sets the error with ``TVMFFIErrorSetRaisedFromCStr``
and returns -1. The functions here, callable from it, read its arguments by index
(tensors as arrays a ``kernel[...]`` launch takes, integers, floats, bools,
pointers), the stream of the TVM-FFI environment, and raise its errors. Layouts
are those of ``tvm/ffi/c_api.h`` and ``dlpack.h`` as apache-tvm-ffi 0.1.15.post2
ships them (64-bit). The two libtvm_ffi functions called are resolved, in this
process, to the addresses of the loaded ``tvm_ffi``; a C library
(:func:`numba_cuda_launch.aot.build`) finds them when first called.

To type checkers a ``voidptr`` (the arguments, a tensor, a C string) is an
``int``; constants (dtypes, ranks, contexts) are the Python values written.
"""

from __future__ import annotations

import ctypes
import functools
from typing import TYPE_CHECKING, Any

import numba
import numpy as np
from llvmlite import binding as ll
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import intrinsic, overload

from numba_cuda_launch.compat.numba_extending import register_jitable
from numba_cuda_launch.errors import NopythonUsageError
from numba_cuda_launch.interop import xla_ffi
from numba_cuda_launch.interop.xla_ffi import c_string, emit_formatted
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.pointer import is_null as _is_null

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = [
    "NONE", "INT", "BOOL", "FLOAT", "OPAQUE_PTR", "DLTENSOR_PTR", "TENSOR",
    "DL_CPU", "DL_CUDA", "DL_CUDA_HOST", "DL_CUDA_MANAGED", "OK", "ERROR",
    "DL_DTYPES", "type_index", "arg_int", "arg_float", "arg_bool", "arg_pointer",
    "arg_tensor", "tensor_data", "tensor_ndim", "tensor_dim", "tensor_stride",
    "tensor_device_type", "tensor_device_id", "tensor_dtype_code", "tensor_dtype_bits",
    "tensor_dtype_lanes", "tensor_is_contiguous", "tensor_as_array", "stream",
    "tensor_stream", "launch_device", "check_call", "check_tensor", "check_int", "check_float",
    "check_bool", "error", "report", "launch_error", "c_string",
]

# TVMFFITypeIndex (c_api.h)
NONE, INT, BOOL, FLOAT, OPAQUE_PTR, DLTENSOR_PTR, TENSOR = 0, 1, 2, 3, 4, 7, 70
# DLDeviceType (dlpack.h)
DL_CPU, DL_CUDA, DL_CUDA_HOST, DL_CUDA_MANAGED = 1, 2, 3, 13
#: what a TVM-FFI function returns
OK, ERROR = 0, -1

# TVMFFIAny: int32 type_index, 4 bytes of padding, an 8-byte value.
_ANY_BYTES, _ANY_VALUE = 16, 8
# A tensor object: the 24-byte TVMFFIObject header (ref count, type index,
# padding, deleter), then its DLTensor.
_OBJECT_HEADER = 24
# DLTensor: data, device {int32 type, int32 id}, int32 ndim, dtype {uint8
# code, uint8 bits, uint16 lanes}, int64 *shape, int64 *strides (NULL:
# C-contiguous), uint64 byte_offset.
_T_DATA, _T_DEVICE_TYPE, _T_DEVICE_ID, _T_NDIM = 0, 8, 12, 16
_T_CODE, _T_BITS, _T_LANES, _T_SHAPE, _T_STRIDES, _T_OFFSET = 20, 21, 22, 24, 32, 40
_MAX_NDIM = 64

#: DLPack ``(code, bits)`` of the NumPy dtypes kernels take (one lane each).
DL_DTYPES: dict[np.dtype[Any], tuple[int, int]] = {
    np.dtype(np.bool_): (6, 8),
    **{np.dtype(t): (0, 8 * np.dtype(t).itemsize)
       for t in (np.int8, np.int16, np.int32, np.int64)},
    **{np.dtype(t): (1, 8 * np.dtype(t).itemsize)
       for t in (np.uint8, np.uint16, np.uint32, np.uint64)},
    **{np.dtype(t): (2, 8 * np.dtype(t).itemsize)
       for t in (np.float16, np.float32, np.float64)},
    np.dtype(np.complex64): (5, 64), np.dtype(np.complex128): (5, 128),
}

_load_ptr = xla_ffi._make_load(types.voidptr)
_load_i64 = xla_ffi._make_load(types.int64)
_load_i32 = xla_ffi._make_load(types.int32)
_load_u8 = xla_ffi._make_load(types.uint8)
_load_u16 = xla_ffi._make_load(types.uint16)
_load_f64 = xla_ffi._make_load(types.float64)
_null = xla_ffi._null
_offset = xla_ffi._offset


# -- the two libtvm_ffi functions -------------------------------------------------

_GET_STREAM, _SET_RAISED = "TVMFFIEnvGetStream", "TVMFFIErrorSetRaisedFromCStr"


@functools.lru_cache(maxsize=None)
def _bind_symbols():
    """Point this process's JIT at libtvm_ffi's two functions (once)."""
    try:
        import tvm_ffi
    except ImportError:
        raise NopythonUsageError(
            "TVM-FFI functions need the apache-tvm-ffi package (pip install "
            "numba-cuda-launch[tvm-ffi]): its libtvm_ffi holds the stream and error "
            "functions they call") from None
    for name in (_GET_STREAM, _SET_RAISED):
        ll.add_symbol(name, ctypes.cast(getattr(tvm_ffi.LIB, name), ctypes.c_void_p).value)


def _declare(builder, name, ret, args):
    _bind_symbols()
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(ret, args), name)


@intrinsic
def _env_get_stream(typingctx, device_type, device_id):
    """``TVMFFIEnvGetStream(device_type, device_id)``."""
    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        fn = _declare(builder, _GET_STREAM, ir.IntType(8).as_pointer(), [i32, i32])
        return builder.call(fn, [context.cast(builder, v, t, types.int32)
                                 for v, t in zip(args, sig.args)])
    return types.voidptr(device_type, device_id), codegen


@intrinsic
def _set_raised(typingctx, kind, message):
    """``TVMFFIErrorSetRaisedFromCStr(kind, message)`` (both C strings; copied)."""
    def codegen(context, builder, sig, args):
        i8p = ir.IntType(8).as_pointer()
        fn = _declare(builder, _SET_RAISED, ir.VoidType(), [i8p, i8p])
        builder.call(fn, list(args))
    return types.void(kind, message), codegen


# -- arguments --------------------------------------------------------------------

@register_jitable
def type_index(args: int, i: int) -> int:
    """The TVM-FFI type index of argument *i* (``INT``, ``TENSOR``, ...)."""
    return _load_i32(args, _ANY_BYTES * i)


@register_jitable
def arg_int(args: int, i: int) -> int:
    """Argument *i*'s value as int64 (an ``INT`` or a ``BOOL``; unchecked)."""
    return _load_i64(args, _ANY_BYTES * i + _ANY_VALUE)


@register_jitable
def arg_float(args: int, i: int) -> float:
    """Argument *i* as float64: a ``FLOAT``'s value, an ``INT``'s or ``BOOL``'s
    converted (unchecked for other kinds)."""
    if type_index(args, i) == FLOAT:
        return _load_f64(args, _ANY_BYTES * i + _ANY_VALUE)
    return np.float64(arg_int(args, i))


@register_jitable
def arg_bool(args: int, i: int) -> bool:
    """Argument *i* (a ``BOOL`` or ``INT``) as a bool."""
    return arg_int(args, i) != 0


@register_jitable
def arg_pointer(args: int, i: int) -> int:
    """Argument *i*'s value as a pointer (an ``OPAQUE_PTR``, e.g. a ctypes
    ``c_void_p`` given from Python; NULL for ``NONE``)."""
    return _load_ptr(args, _ANY_BYTES * i + _ANY_VALUE)


@register_jitable
def arg_tensor(args: int, i: int) -> int:
    """The ``DLTensor*`` of argument *i*, or NULL when it is not a tensor
    (``DLTENSOR_PTR``: the value; ``TENSOR``: the object's DLTensor)."""
    kind = type_index(args, i)
    if kind == DLTENSOR_PTR:
        return arg_pointer(args, i)
    if kind == TENSOR:
        return _offset(arg_pointer(args, i), _OBJECT_HEADER)
    return _null()


@register_jitable
def tensor_data(t: int) -> int:
    """The address of tensor *t*'s first element (its data plus its byte offset)."""
    return _offset(_load_ptr(t, _T_DATA), _load_i64(t, _T_OFFSET))


@register_jitable
def tensor_ndim(t: int) -> int:
    """The number of dimensions of tensor *t*."""
    return np.int64(_load_i32(t, _T_NDIM))


@register_jitable
def tensor_dim(t: int, d: int) -> int:
    """The extent of dimension *d* of tensor *t*."""
    return _load_i64(_load_ptr(t, _T_SHAPE), 8 * d)


@register_jitable
def tensor_stride(t: int, d: int) -> int:
    """The stride of dimension *d* of tensor *t*, in elements (a tensor
    without strides is C-contiguous)."""
    strides = _load_ptr(t, _T_STRIDES)
    if not _is_null(strides):
        return _load_i64(strides, 8 * d)
    s = np.int64(1)
    for k in range(d + 1, tensor_ndim(t)):
        s *= tensor_dim(t, k)
    return s


@register_jitable
def tensor_device_type(t: int) -> int:
    """The DLPack device type of tensor *t* (``DL_CUDA``, ``DL_CPU``, ...)."""
    return np.int64(_load_i32(t, _T_DEVICE_TYPE))


@register_jitable
def tensor_device_id(t: int) -> int:
    """The device number of tensor *t*."""
    return np.int64(_load_i32(t, _T_DEVICE_ID))


@register_jitable
def tensor_dtype_code(t: int) -> int:
    """The DLPack type code of tensor *t*'s elements (0 int, 1 uint, 2 float, ...)."""
    return np.int64(_load_u8(t, _T_CODE))


@register_jitable
def tensor_dtype_bits(t: int) -> int:
    """The bits of one lane of tensor *t*'s elements."""
    return np.int64(_load_u8(t, _T_BITS))


@register_jitable
def tensor_dtype_lanes(t: int) -> int:
    """The lanes of tensor *t*'s elements (1 for the types kernels take)."""
    return np.int64(_load_u16(t, _T_LANES))


@register_jitable
def tensor_is_contiguous(t: int) -> bool:
    """True when tensor *t* is C-contiguous: no strides, or the strides of
    a C-ordered tensor of its shape (any stride for an extent of 1; any
    strides for an empty tensor)."""
    strides = _load_ptr(t, _T_STRIDES)
    if _is_null(strides):
        return True
    ndim = tensor_ndim(t)
    for d in range(ndim):
        if tensor_dim(t, d) == 0:
            return True
    expected = np.int64(1)
    for k in range(ndim):
        d = ndim - 1 - k
        n = tensor_dim(t, d)
        if n != 1 and _load_i64(strides, 8 * d) != expected:
            return False
        expected *= n
    return True


def tensor_as_array(t: int, ndim: int, dtype: DTypeLike) -> np.ndarray:
    """A C-ordered array view of tensor *t* (``ndim`` and ``dtype``
    constants), what ``kernel[...]`` takes: check it first
    (:func:`check_tensor`): the view trusts the tensor's dtype, rank and
    contiguity."""
    raise NotImplementedError("only in nopython code")


@overload(tensor_as_array, prefer_literal=True)
def _tensor_as_array(t, ndim, dtype):
    rank = _constant_ndim(ndim, "tensor_as_array")
    xla_ffi._constant_dtype(dtype, "tensor_as_array", tuple(DL_DTYPES))
    load_shape = xla_ffi._make_load(types.UniTuple(types.int64, rank))

    def impl(t, ndim, dtype):
        return numba.carray(tensor_data(t), load_shape(_load_ptr(t, _T_SHAPE), 0), dtype)
    return impl


def _constant_ndim(ndim, fn):
    if not (isinstance(ndim, types.IntegerLiteral) and 0 <= ndim.literal_value <= _MAX_NDIM):
        raise NopythonUsageError("%s: ndim must be a constant integer from 0 to %d, got %s"
                                 % (fn, _MAX_NDIM, ndim))
    return ndim.literal_value


# -- the stream ----------------------------------------------------------------

@register_jitable
def stream(device_type: int, device_id: int) -> int:
    """The TVM-FFI environment's stream of a device (``TVMFFIEnvGetStream``):
    the caller's current stream (PyTorch's, when called with PyTorch tensors;
    JAX's under jax-tvm-ffi), NULL when none was set."""
    return _env_get_stream(device_type, device_id)


@register_jitable
def tensor_stream(t: int) -> int:
    """The environment's stream of tensor *t*'s device."""
    return _env_get_stream(tensor_device_type(t), tensor_device_id(t))


@intrinsic
def _launch_device(typingctx, stream):
    def codegen(context, builder, sig, args):
        status, device = BACKEND.runtime(context).emit_launch_device(builder, args[0])
        failed = builder.icmp_signed("!=", status, status.type(0))
        return builder.select(failed, ir.Constant(ir.IntType(64), -1),
                              builder.sext(device, ir.IntType(64)))
    return types.int64(types.voidptr), codegen


@register_jitable
def launch_device(stream: int) -> int:
    """The ordinal of the device a launch on *stream* runs on: the stream's
    (its context's device), the current device for the default streams
    (NULL); -1 when the driver cannot say."""
    return _launch_device(stream)


# -- errors ---------------------------------------------------------------------

@register_jitable
def error(kind: int, message: int) -> int:
    """Raise the TVM-FFI error *kind* (a C string: ``c_string("ValueError")``;
    Python raises the exception of that name) with *message* (a C string,
    copied) and return ``ERROR``, what the function then returns."""
    _set_raised(kind, message)
    return ERROR


_MESSAGE_BYTES = 1024


@intrinsic
def _format(typingctx, fmt, values):
    """printf format *fmt* (a C string) applied to the tuple *values*
    (integers as ``long long``, ``%lld``; voidptr as C strings, ``%s``) in a
    stack buffer of the function it is lowered in."""
    if not isinstance(values, types.BaseTuple):
        raise NopythonUsageError("report() takes its values as a tuple, got %s" % values)

    def codegen(context, builder, sig, args):
        items = cgutils.unpack_tuple(builder, args[1], len(sig.args[1]))
        return emit_formatted(context, builder, args[0], items, list(sig.args[1]),
                              _MESSAGE_BYTES)
    return types.voidptr(fmt, values), codegen


@register_jitable
def report(kind: int, fmt: int, values: tuple[Any, ...] = ()) -> int:
    """Raise error *kind* (a C string) whose message is printf format *fmt*
    (a C string) applied to the tuple *values* (integers ``%lld``, C strings
    ``%s``); returns ``ERROR``."""
    return error(kind, _format(fmt, values))


_TYPE_NAMES = {NONE: "None", INT: "an int", BOOL: "a bool", FLOAT: "a float",
               OPAQUE_PTR: "a pointer", 5: "a dtype", 6: "a device", 8: "a string",
               9: "bytes", 11: "a string", 12: "bytes", 64: "an object", 65: "a string",
               66: "bytes", 67: "an error", 68: "a function", 69: "a shape", 71: "an array",
               72: "a map", 73: "a module", 74: "a Python object", 75: "a list",
               76: "a dict"}
_type_name = xla_ffi._name_table(_TYPE_NAMES)
_DL_NAMES = {(c << 8) | b: d.name for d, (c, b) in DL_DTYPES.items()}
_DL_NAMES.update({(4 << 8) | 16: "bfloat16", (2 << 8) | 8: "float8"})
_dl_name = xla_ffi._name_table(_DL_NAMES)
_DEVICE_NAMES = {DL_CPU: "host (CPU)", DL_CUDA: "CUDA", DL_CUDA_HOST: "CUDA host (pinned)",
                 DL_CUDA_MANAGED: "CUDA managed", 4: "OpenCL", 7: "Vulkan", 8: "Metal",
                 10: "ROCm", 14: "oneAPI"}
_device_name = xla_ffi._name_table(_DEVICE_NAMES)


@register_jitable
def _type_text(kind):
    name = _type_name(kind)
    return c_string("an object of another type") if _is_null(name) else name


@register_jitable
def _dtype_text(code, bits, lanes):
    name = _dl_name((code << 8) | bits)
    if lanes != 1 or _is_null(name):
        return c_string("a DLPack type the kernels do not take")
    return name


@register_jitable
def _device_text(device_type):
    name = _device_name(device_type)
    return c_string("another kind of device") if _is_null(name) else name


@register_jitable
def _type_error():
    return c_string("TypeError")


@register_jitable
def _value_error():
    return c_string("ValueError")


# Device types a kernel's arrays may be on: device memory, or host memory
# under the simulator (kernels run on the host there).
_ON_HOST = BACKEND.runs_on_host
_DEVICE_A, _DEVICE_B = (DL_CPU, DL_CPU) if _ON_HOST else (DL_CUDA, DL_CUDA_MANAGED)
_BAD_DEVICE = ("%s: %s is in %s memory (DLPack device type %lld, "
               "device %lld); the kernel takes " + (
                   "host memory (kernels run in numba-cuda's simulator)" if _ON_HOST
                   else "CUDA device memory"))


@intrinsic
def _who(typingctx, what, name, i):
    """How messages name argument *i*: ``parameter 'x' (argument 0)`` (*what*
    and *name* C strings), or ``argument 0`` when *name* is empty; in a
    buffer of the function it is lowered in."""
    def codegen(context, builder, sig, args):
        i8p, i64 = ir.IntType(8).as_pointer(), ir.IntType(64)
        buf = builder.bitcast(xla_ffi.stack_buffer(builder, 256), i8p)
        index = context.cast(builder, args[2], sig.args[2], types.int64)
        size = ir.Constant(i64, 256)
        unnamed = builder.icmp_unsigned("==", builder.load(args[1]),
                                        ir.Constant(ir.IntType(8), 0))
        with builder.if_else(unnamed) as (then, otherwise):
            with then:
                fmt = xla_ffi._global_bytes(context, builder, b"argument %lld\0")
                xla_ffi.emit_snprintf(builder, buf, size, fmt, index)
            with otherwise:
                fmt = xla_ffi._global_bytes(context, builder, b"%s '%s' (argument %lld)\0")
                xla_ffi.emit_snprintf(builder, buf, size, fmt, args[0], args[1], index)
        return buf
    return types.voidptr(what, name, i), codegen


_NO_ARGUMENT = "%s: the call has no argument %lld (%s); it has %lld"
_NOT_TENSOR = ("%s: %s must be a %s tensor of rank %lld, got %s (TVM-FFI type index %lld)")
_BAD_TENSOR = ("%s: %s must be a %s tensor of rank %lld, got %s (DLPack code %lld, %lld bits, "
               "%lld lanes) of rank %lld")
_NOT_CONTIGUOUS = ("%s: %s is not C-contiguous (its strides are not those of a C-ordered "
                   "tensor of its shape); the kernel takes C-contiguous arrays: pass a "
                   "contiguous copy (x.contiguous() in PyTorch)")
_MISALIGNED = ("%s: %s: its first element, at %#llx, is not aligned to its item size "
               "(%lld bytes)")
_NULL_DATA = "%s: %s: its data pointer is NULL, and it is not empty"


# Inlined (Numba IR) so that the description's buffer is the caller's.
@numba.njit(inline="always")
def _parameter_who(name, i):
    return _who(c_string("parameter"), name, i)


@numba.njit(inline="always")
def _scalar_who(name, i):
    return _who(c_string("scalar"), name, i)


@register_jitable
def check_tensor_at(args, num_args, i, code, bits, ndim, itemsize, context, name):
    """``OK``, or the error (raised) saying how argument *i* (parameter *name*,
    a C string, may be empty) differs from a C-contiguous tensor of DLPack
    type (*code*, *bits*) and rank *ndim* on the kernels' device, aligned
    for *itemsize*; *context* (a C string) begins the message."""
    # A passing call runs the one test below (small enough for LLVM to inline
    # into the caller, where the expected values are constants); what failed
    # is found again, and said, out of line.
    if i >= 0 and i < num_args and _tensor_ok(arg_tensor(args, i), code, bits, ndim,
                                                itemsize):
        return OK
    return _tensor_error(args, num_args, i, code, bits, ndim, itemsize, context, name)


@register_jitable
def _tensor_ok(t, code, bits, ndim, itemsize):
    """True when tensor *t* (may be NULL) passes :func:`check_tensor_at`."""
    if _is_null(t):
        return False
    device = tensor_device_type(t)
    return (tensor_dtype_code(t) == code and tensor_dtype_bits(t) == bits
            and tensor_dtype_lanes(t) == 1 and tensor_ndim(t) == ndim
            and (device == _DEVICE_A or device == _DEVICE_B) and tensor_is_contiguous(t)
            and _data_ok(_pointer_value(tensor_data(t)), itemsize, t))


@register_jitable
def _data_ok(address, itemsize, t):
    """*address*, tensor *t*'s first element, is aligned for *itemsize* and
    not NULL unless *t* is empty (an empty tensor's data may be NULL)."""
    return address % itemsize == 0 and (address != 0 or _is_empty(t))


@register_jitable
def _is_empty(t):
    """True when tensor *t* has no element (an extent of 0)."""
    for d in range(tensor_ndim(t)):
        if tensor_dim(t, d) == 0:
            return True
    return False


@register_jitable
def _tensor_error(args, num_args, i, code, bits, ndim, itemsize, context, name):
    """:func:`check_tensor_at`'s error for argument *i* (raised; ``ERROR``),
    the first of its tests that fails."""
    if i < 0 or i >= num_args:
        return report(_type_error(), c_string(_NO_ARGUMENT), (context, i, name, num_args))
    t = arg_tensor(args, i)
    if _is_null(t):
        kind = type_index(args, i)
        return report(_type_error(), c_string(_NOT_TENSOR), (
            context, _parameter_who(name, i), _dtype_text(code, bits, 1), ndim,
            _type_text(kind), kind))
    got_code, got_bits = tensor_dtype_code(t), tensor_dtype_bits(t)
    lanes, rank = tensor_dtype_lanes(t), tensor_ndim(t)
    if got_code != code or got_bits != bits or lanes != 1 or rank != ndim:
        return report(_type_error(), c_string(_BAD_TENSOR), (
            context, _parameter_who(name, i), _dtype_text(code, bits, 1), ndim,
            _dtype_text(got_code, got_bits, lanes), got_code, got_bits, lanes, rank))
    device = tensor_device_type(t)
    if device != _DEVICE_A and device != _DEVICE_B:
        return report(_type_error(), c_string(_BAD_DEVICE), (
            context, _parameter_who(name, i), _device_text(device), device,
            tensor_device_id(t)))
    if not tensor_is_contiguous(t):
        return report(_value_error(), c_string(_NOT_CONTIGUOUS),
                      (context, _parameter_who(name, i)))
    address = _pointer_value(tensor_data(t))
    if address % itemsize != 0:
        return report(_value_error(), c_string(_MISALIGNED),
                      (context, _parameter_who(name, i), address, itemsize))
    if address == 0 and not _is_empty(t):
        return report(_value_error(), c_string(_NULL_DATA), (context, _parameter_who(name, i)))
    return OK


@intrinsic
def _pointer_value(typingctx, ptr):
    """The address *ptr* holds, as int64."""
    def codegen(context, builder, sig, args):
        return builder.ptrtoint(args[0], ir.IntType(64))
    return types.int64(ptr), codegen


def check_call(num_args: int, n: int, context: str) -> int:
    """``OK`` when the call has *n* arguments; else the error (a ``TypeError``
    whose message begins with *context*, a string constant) is raised and
    ``ERROR`` returned."""
    raise NotImplementedError("only in nopython code")


@overload(check_call, prefer_literal=True)
def _check_call(num_args, n, context):
    _context_text(context, "check_call")

    def impl(num_args, n, context):
        if num_args != n:
            return report(_type_error(), c_string("%s: takes %lld argument(s), got %lld"), (c_string(context), n, num_args,))
        return OK
    return impl


def check_tensor(args: int, num_args: int, i: int, dtype: DTypeLike, ndim: int,
                 context: str) -> int:
    """``OK`` when argument *i* is a C-contiguous tensor of *dtype* and rank
    *ndim* (constants) on a CUDA device (the CPU under numba-cuda's
    simulator) whose data is aligned to its item size; else the error
    (``TypeError`` or ``ValueError``) is raised and ``ERROR`` returned."""
    raise NotImplementedError("only in nopython code")


@overload(check_tensor, prefer_literal=True)
def _check_tensor(args, num_args, i, dtype, ndim, context):
    np_dtype = xla_ffi._constant_dtype(dtype, "check_tensor", tuple(DL_DTYPES))
    code, bits = DL_DTYPES[np_dtype]
    rank = _constant_ndim(ndim, "check_tensor")
    _context_text(context, "check_tensor")
    itemsize = np_dtype.itemsize

    def impl(args, num_args, i, dtype, ndim, context):
        return check_tensor_at(args, num_args, i, code, bits, rank, itemsize,
                               c_string(context), c_string(""))
    return impl


def _context_text(context, fn):
    if not isinstance(context, types.StringLiteral):
        raise NopythonUsageError("%s: the context (how messages name the function) must be a "
                                 "string constant, got %s" % (fn, context))
    return context.literal_value


_NOT_BOOL = "%s: %s must be True or False (a bool), got %s"
_FLOAT_FOR_INT = ("%s: %s is a %s: got a float, and float -> integer conversion is refused "
                  "(it truncates): pass an integer")
_NOT_INT = "%s: %s must be an integer (a %s), got %s"
_INT_RANGE = "%s: %s: %lld is out of the range of %s [%lld, %lld]"
_NOT_NUMBER = "%s: %s must be a number (a %s), got %s"
_FLOAT_RANGE = "%s: %s: %g is out of the range of %s (it would round to infinity)"


@register_jitable
def check_scalar_at(args, num_args, i, kind, low, high, fmax, context, name, dtype_name):
    """``OK``, or the error (raised) saying why argument *i* (parameter *name*
    of *dtype_name*, C strings) cannot be passed as that type without a
    change of value. *kind*: 0 bool (a bool only), 1 integer (an int or bool
    in [*low*, *high*]), 2 float (a float, int or bool whose magnitude, if
    finite, is at most *fmax*, the largest that rounds to a finite value)."""
    # as check_tensor_at: one test inline, the message out of line
    if i >= 0 and i < num_args and _scalar_ok(args, i, kind, low, high, fmax):
        return OK
    return _scalar_error(args, num_args, i, kind, low, high, fmax, context, name, dtype_name)


@register_jitable
def _scalar_ok(args, i, kind, low, high, fmax):
    """True when argument *i* passes :func:`check_scalar_at`."""
    got = type_index(args, i)
    if kind == 0:
        return got == BOOL
    if kind == 1:
        if got != INT and got != BOOL:
            return False
        v = arg_int(args, i)
        return v >= low and v <= high
    if got != FLOAT and got != INT and got != BOOL:
        return False
    x = abs(arg_float(args, i))
    return not (x > fmax and x < np.inf)


@register_jitable
def _scalar_error(args, num_args, i, kind, low, high, fmax, context, name, dtype_name):
    """:func:`check_scalar_at`'s error for argument *i* (raised; ``ERROR``),
    the first of its tests that fails."""
    if i < 0 or i >= num_args:
        return report(_type_error(), c_string(_NO_ARGUMENT), (context, i, name, num_args))
    got = type_index(args, i)
    if kind == 0:
        if got != BOOL:
            return report(_type_error(), c_string(_NOT_BOOL),
                          (context, _scalar_who(name, i), _type_text(got)))
        return OK
    if kind == 1:
        if got == FLOAT:
            return report(_type_error(), c_string(_FLOAT_FOR_INT),
                          (context, _scalar_who(name, i), dtype_name))
        if got != INT and got != BOOL:
            return report(_type_error(), c_string(_NOT_INT),
                          (context, _scalar_who(name, i), dtype_name, _type_text(got)))
        v = arg_int(args, i)
        if v < low or v > high:
            return report(_value_error(), c_string(_INT_RANGE),
                          (context, _scalar_who(name, i), v, dtype_name, low, high))
        return OK
    if got != FLOAT and got != INT and got != BOOL:
        return report(_type_error(), c_string(_NOT_NUMBER),
                      (context, _scalar_who(name, i), dtype_name, _type_text(got)))
    x = arg_float(args, i)
    if abs(x) > fmax and abs(x) < np.inf:
        return report(_value_error(), c_string(_FLOAT_RANGE),
                      (context, _scalar_who(name, i), x, dtype_name))
    return OK


def _scalar_check(fn, kind_of):
    def typer(args, num_args, i, dtype, context):
        np_dtype = xla_ffi._constant_dtype(dtype, fn, tuple(d for d in DL_DTYPES
                                                              if d.kind in kind_of))
        kind, low, high, fmax = scalar_limits(np_dtype)
        _context_text(context, fn)
        dname = str(np_dtype)

        def impl(args, num_args, i, dtype, context):
            return check_scalar_at(args, num_args, i, kind, low, high, fmax,
                                   c_string(context), c_string(""), c_string(dname))
        return impl
    return typer


def scalar_limits(dtype: np.dtype[Any]) -> tuple[int, int, int, float]:
    """``(kind, low, high, fmax)`` of :func:`check_scalar_at` for a scalar of *dtype*."""
    if dtype.kind == "b":
        return 0, 0, 1, 0.0
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return 1, int(info.min), min(int(info.max), 2**63 - 1), 0.0
    # the largest double that rounds to a finite value of *dtype*: half an
    # ulp above the largest finite value rounds to infinity
    finfo = np.finfo(dtype)
    if dtype == np.float64:
        return 2, 0, 0, float(finfo.max)
    half_ulp = 2.0 ** (finfo.maxexp - finfo.nmant - 2)  # of the largest finite value
    return 2, 0, 0, float(np.nextafter(float(finfo.max) + half_ulp, 0.0))


def check_int(args: int, num_args: int, i: int, dtype: DTypeLike, context: str) -> int:
    """``OK`` when argument *i* is an int (or bool) that *dtype* (an integer
    type constant) holds; else the error is raised and ``ERROR`` returned."""
    raise NotImplementedError("only in nopython code")


def check_float(args: int, num_args: int, i: int, dtype: DTypeLike, context: str) -> int:
    """``OK`` when argument *i* is a number (float, int or bool) that rounds to a
    finite value of *dtype* (a float type constant) if finite; else the error
    is raised and ``ERROR`` returned."""
    raise NotImplementedError("only in nopython code")


def check_bool(args: int, num_args: int, i: int, context: str) -> int:
    """``OK`` when argument *i* is a bool; else the error is raised."""
    raise NotImplementedError("only in nopython code")


overload(check_int, prefer_literal=True)(_scalar_check("check_int", "iu"))
overload(check_float, prefer_literal=True)(_scalar_check("check_float", "f"))


@overload(check_bool, prefer_literal=True)
def _check_bool(args, num_args, i, context):
    _context_text(context, "check_bool")

    def impl(args, num_args, i, context):
        return check_scalar_at(args, num_args, i, 0, 0, 1, 0.0, c_string(context),
                               c_string(""), c_string("bool"))
    return impl


def launch_error(status: int, context: str) -> int:
    """Raise a ``RuntimeError`` for a failed launch: *context* (a string
    constant) with the driver's error name and code (``"... failed:
    CUDA_ERROR_INVALID_VALUE (1)"``); returns ``ERROR``."""
    raise NotImplementedError("only in nopython code")


@overload(launch_error, prefer_literal=True)
def _launch_error(status, context):
    _context_text(context, "launch_error")

    def impl(status, context):
        return launch_error_at(status, c_string(context))
    return impl


@register_jitable
def launch_error_at(status, context):
    """:func:`launch_error` with *context* a C string."""
    name = xla_ffi._error_name(status)  # the driver's, else the package's
    if _is_null(name):
        name = c_string("an unknown CUDA error")
    return report(c_string("RuntimeError"), c_string("%s failed: %s (%lld)"), (context, name,
                  status,))
