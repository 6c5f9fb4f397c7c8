"""XLA's typed FFI from nopython code: read a call frame, answer XLA (docs/jax.md,
"Writing a handler by hand").

An XLA FFI handler is ``@cfunc(voidptr(voidptr))``; the functions here read its
buffers, attributes and stream and create its errors. Offsets are those of
``xla/ffi/api/c_api.h`` (API major version 0, 64-bit), checked against jaxlib 0.10
and 0.11.

To type checkers a ``voidptr`` (a frame, a buffer, an error, a C string) is
an ``int``, and the constants (names, contexts, dtypes, ranks) are the
Python values written in the call.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import os
import re
from typing import TYPE_CHECKING, Any, Callable

import numba
import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba_cuda_launch.errors import NopythonUsageError
from numba_cuda_launch.errors import _KNOWN_NAMES as _KNOWN_ERROR_NAMES
from numba.extending import intrinsic, lower_builtin, overload, type_callable

from numba_cuda_launch.compat.numba_caching import add_reload_checks
from numba_cuda_launch.compat.numba_extending import Function, cached_jitable, register_jitable
from numba_cuda_launch.launch.halffloat import half_bits_to_float  # noqa: F401 (public here)
from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.launch.caching import BuildCheck, package_build
from numba_cuda_launch.launch.pointer import is_null as _is_null

if TYPE_CHECKING:
    from numpy.typing import DTypeLike

__all__ = [
    "api_version", "DTYPES", "dtype_code", "COMMAND_BUFFER_COMPATIBLE",
    "check_call", "check_arg", "check_ret", "check_attr", "is_error",
    "STAGE_INSTANTIATE", "STAGE_PREPARE", "STAGE_INITIALIZE", "STAGE_EXECUTE",
    "is_metadata_query", "answer_metadata_query", "execution_stage",
    "num_args", "num_rets", "arg_buffer", "ret_buffer", "buffer_dtype",
    "buffer_data", "buffer_rank", "buffer_dim", "buffer_as_array",
    "attr_index", "attr_int", "attr_float", "attr_string_data",
    "attr_string_len", "attr_array_size", "attr_array_data", "stream",
    "error", "launch_error", "ok", "c_string", "half_bits_to_float",
    "bfloat16_bits_to_float",
]

# XLA_FFI_CallFrame: struct_size, extension_start, api, ctx, stage, then
# the args, rets and attrs structs {struct_size, ext, size, types, items}.
_FRAME_EXT, _FRAME_API, _FRAME_CTX, _FRAME_STAGE = 8, 16, 24, 32
_FRAME_ARGS, _FRAME_RETS, _FRAME_ATTRS = 40, 80, 120
_SIZE, _TYPES, _ITEMS, _ATTR_VALUES = 16, 24, 32, 40
# XLA_FFI_Buffer: struct_size, ext, dtype (i32), data, rank, dims.
_BUF_DTYPE, _BUF_DATA, _BUF_RANK, _BUF_DIMS = 16, 24, 32, 40
# XLA_FFI_Api: struct_size, ext, api_version{size, ext, major, minor},
# internal_api, then the function table.
_API_MAJOR, _API_MINOR = 32, 36
_API_ERROR_CREATE, _API_ERROR_DESTROY, _API_STREAM_GET = 48, 64, 80
# XLA_FFI_Metadata_Extension: {struct_size, type (i32), next}, metadata*;
# XLA_FFI_Metadata: struct_size, api_version{size, ext, major, minor}, traits.
_EXT_TYPE, _EXT_METADATA = 8, 24
_META_MAJOR, _META_MINOR, _META_TRAITS = 24, 28, 32
_EXTENSION_METADATA = 1
_ATTR_ARRAY, _ATTR_SCALAR, _ATTR_STRING = 1, 3, 4

STAGE_INSTANTIATE, STAGE_PREPARE, STAGE_INITIALIZE, STAGE_EXECUTE = 0, 1, 2, 3
COMMAND_BUFFER_COMPATIBLE = 1  # XLA_FFI_HANDLER_TRAITS_COMMAND_BUFFER_COMPATIBLE
_ERROR_INTERNAL = 13  # XLA_FFI_Error_Code_INTERNAL
_MAX_NDIM = 64  # NumPy's limit on dimensions, which JAX's arrays share

#: XLA_FFI_DataType codes of the NumPy dtypes kernels take.
DTYPES: dict[np.dtype[Any], int] = {
    np.dtype(np.bool_): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3,
    np.dtype(np.int32): 4, np.dtype(np.int64): 5, np.dtype(np.uint8): 6,
    np.dtype(np.uint16): 7, np.dtype(np.uint32): 8, np.dtype(np.uint64): 9,
    np.dtype(np.float16): 10, np.dtype(np.float32): 11, np.dtype(np.float64): 12,
    np.dtype(np.complex64): 15, np.dtype(np.complex128): 18,
}
# Scalar attribute codes the readers decode: PRED, S8-S64, U8-U64, F16, F32, F64, BF16.
_F16, _F32, _F64, _BF16 = 10, 11, 12, 16
_SCALAR_CODES = (1, 2, 3, 4, 5, 6, 7, 8, 9, _F16, _F32, _F64, _BF16)
# Element types XLA gives array attributes (DenseArray/DenseElements attrs).
_ARRAY_ATTR_DTYPES = tuple(np.dtype(t) for t in (
    np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
    np.uint64, np.float32, np.float64))


def _dtype_text(dtype):
    try:
        return str(np.dtype(dtype))
    except TypeError:
        return repr(dtype)


def dtype_code(dtype: DTypeLike) -> int:
    """The ``XLA_FFI_DataType`` of a NumPy dtype; ``TypeError`` for a dtype
    no kernel could take (strings, objects, datetimes, bfloat16...)."""
    try:
        return DTYPES[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(
            "XLA FFI: no kernel-compatible XLA data type for dtype %s; supported: %s"
            % (_dtype_text(dtype), ", ".join(str(d) for d in DTYPES))) from None


@functools.lru_cache(maxsize=None)
def api_version() -> tuple[int, int]:
    """``(major, minor)`` of the installed jaxlib's XLA FFI API, read from the
    ``c_api.h`` it ships; ``(0, 1)`` (the oldest typed FFI) if not found."""
    try:
        import jaxlib

        header = os.path.join(os.path.dirname(jaxlib.__file__),
                              "include", "xla", "ffi", "api", "c_api.h")
        with open(header) as f:
            text = f.read()
        major = re.search(r"#define XLA_FFI_API_MAJOR (\d+)", text)
        minor = re.search(r"#define XLA_FFI_API_MINOR (\d+)", text)
        if major is None or minor is None:
            return 0, 1
        return int(major.group(1)), int(minor.group(1))
    except Exception:  # no jaxlib, or a layout this code does not know
        return 0, 1


# -- raw memory access ----------------------------------------------------------

def _field(context, builder, base, offset, fe_type):
    """Pointer to the *fe_type* at byte *offset* of *base* (an address or a pointer).
    Code reading XLA's structs is cached only for this build of the package
    (:class:`...launch.caching.BuildCheck`), which knows their layout."""
    add_reload_checks(context, [BuildCheck(package_build())])
    if isinstance(base.type, ir.IntType):
        base = builder.inttoptr(base, ir.IntType(8).as_pointer())
    ptr = builder.gep(base, [offset])
    return builder.bitcast(ptr, context.get_value_type(fe_type).as_pointer())


def _make_load(fe_type):
    @intrinsic
    def load(typingctx, base, offset):
        def codegen(context, builder, sig, args):
            return builder.load(_field(context, builder, args[0], args[1], fe_type))
        return fe_type(base, offset), codegen
    return load


_load_ptr = _make_load(types.voidptr)
_load_i64 = _make_load(types.int64)
_load_i32 = _make_load(types.int32)
_load_u8 = _make_load(types.uint8)
_load_u16 = _make_load(types.uint16)
_load_f32 = _make_load(types.float32)
_load_f64 = _make_load(types.float64)


def _make_bitcast(from_type, to_type):
    """An intrinsic reinterpreting the bits of a *from_type* as a *to_type*."""
    @intrinsic
    def bitcast(typingctx, value):
        def codegen(context, builder, sig, args):
            v = context.cast(builder, args[0], sig.args[0], from_type)
            return builder.bitcast(v, context.get_value_type(to_type))
        return to_type(value), codegen
    return bitcast


_f32_from_bits = _make_bitcast(types.int32, types.float32)


@cached_jitable
def bfloat16_bits_to_float(bits: int) -> float:
    """The float64 value of bfloat16 *bits* (the top half of a float32)."""
    return np.float64(_f32_from_bits(np.int32((np.int64(bits) & 0xFFFF) << 16)))


def _emit_error_name(context, builder, status):
    """Lowering code: the C string naming CUDA status *status* (an ``i64``):
    the driver's name (``cuGetErrorName`` through the driver table), else,
    with no driver (the simulator, XLA:CPU), the package's; NULL when
    neither knows it."""
    voidp = ir.IntType(8).as_pointer()
    out = cgutils.alloca_once_value(builder, ir.Constant(voidp, None))
    driver.call(builder, "cuGetErrorName", [builder.trunc(status, ir.IntType(32)), out])
    name = builder.load(out)
    return builder.select(cgutils.is_null(builder, name),
                          _emit_name(context, builder, _KNOWN_ERROR_NAMES, status), name)


@intrinsic
def _error_name(typingctx, status):
    """The C string naming CUDA status *status* (:func:`_emit_error_name`), or NULL."""
    def codegen(context, builder, sig, args):
        return _emit_error_name(context, builder,
                                context.cast(builder, args[0], sig.args[0], types.int64))
    return types.voidptr(status), codegen


@intrinsic
def _null(typingctx):
    def codegen(context, builder, sig, args):
        return ir.Constant(ir.IntType(8).as_pointer(), None)
    return types.voidptr(), codegen


if TYPE_CHECKING:
    # What handlers call; the intrinsics take Numba's typing context first.
    def ok() -> int:
        """The NULL ``XLA_FFI_Error*`` a successful handler returns."""

    def c_string(text: str) -> int:
        """A NUL-terminated constant C string (voidptr) of constant *text*."""
else:
    ok = _null
    ok.__doc__ = "``ok()``: the NULL ``XLA_FFI_Error*`` a successful handler returns."

    @intrinsic
    def c_string(typingctx, text):
        """``c_string("text")``: a NUL-terminated constant C string (voidptr)."""
        if not isinstance(text, types.StringLiteral):
            raise NopythonUsageError("c_string() takes a string constant, got %s" % text)
        data = text.literal_value.encode() + b"\0"

        def codegen(context, builder, sig, args):
            return _global_bytes(context, builder, data)
        return types.voidptr(text), codegen


def _global_bytes(context, builder, data):
    """An ``i8*`` to a constant global holding *data* (one per content and module)."""
    name = "numba_cuda_launch_cstr_" + hashlib.sha1(data).hexdigest()[:16]
    gv = context.insert_unique_const(
        builder.module, name, ir.Constant(ir.ArrayType(ir.IntType(8), len(data)), bytearray(data)))
    return builder.bitcast(gv, ir.IntType(8).as_pointer())


def _constant_bytes(data):
    """An intrinsic ``() -> voidptr``: the address of constant bytes *data*."""
    @intrinsic
    def constant(typingctx):
        def codegen(context, builder, sig, args):
            return _global_bytes(context, builder, data)
        return types.voidptr(), codegen
    return constant


@intrinsic
def _offset(typingctx, ptr, n):
    """``ptr + n`` bytes, a voidptr."""
    def codegen(context, builder, sig, args):
        n = context.cast(builder, args[1], sig.args[1], types.intp)
        return builder.gep(args[0], [n])
    return types.voidptr(ptr, n), codegen


# -- readers lowered where they are called -----------------------------------------
# The frame's readers are a few loads each: typed and lowered in the function
# that calls them, as Numba's built-ins are, not functions compiled on their
# own (a Numba compile of its own, and machine code again in every caller,
# cost more than ten times the code they emit).

# the parameters that are addresses
_POINTERS = ("frame", "buf", "message", "key", "name", "reads", "context")


class _Emitter:
    """Lowering helpers of the readers: loads at byte offsets of an ``i8*``."""

    def __init__(self, context, builder):
        self.context, self.builder = context, builder

    def load(self, fe_type, base, offset, align=None):
        if isinstance(offset, int):
            offset = ir.Constant(ir.IntType(64), offset)
        return self.builder.load(_field(self.context, self.builder, base, offset, fe_type),
                                 align=align)

    def ptr(self, base, offset):
        return self.load(types.voidptr, base, offset)

    def i64(self, base, offset):
        return self.load(types.int64, base, offset)

    def i32(self, base, offset):
        return self.load(types.int32, base, offset)

    def store(self, fe_type, base, offset, value):
        self.builder.store(value, _field(self.context, self.builder, base,
                                         ir.Constant(ir.IntType(64), offset), fe_type))

    def args_struct(self, size, struct_size):
        """A zeroed ``XLA_FFI_*_Args`` of *size* bytes on the stack, its
        ``struct_size`` set: its ``i8*``."""
        buf = cgutils.alloca_once(self.builder, ir.ArrayType(ir.IntType(8), size), zfill=True)
        buf = self.builder.bitcast(buf, ir.IntType(8).as_pointer())
        self.store(types.int64, buf, 0, ir.Constant(ir.IntType(64), struct_size))
        return buf

    def call_api(self, frame, slot, args):
        """``XLA_FFI_Error* api->slot(args)`` of the frame's API table."""
        voidp = ir.IntType(8).as_pointer()
        fnty = ir.FunctionType(voidp, [voidp])
        fn = self.ptr(self.ptr(frame, _FRAME_API), slot)
        return self.builder.call(self.builder.bitcast(fn, fnty.as_pointer()), [args])

    def times(self, n, value):
        """``n * value`` (an i64 value)."""
        return self.builder.mul(ir.Constant(ir.IntType(64), n), value)

    def choose(self, cond, then, otherwise):
        """``then() if cond else otherwise()``, each run only on its branch."""
        builder = self.builder
        with builder.if_else(cond) as (on_then, on_else):
            with on_then:
                a, block_a = then(), builder.block
            with on_else:
                b, block_b = otherwise(), builder.block
        phi = builder.phi(a.type)
        phi.add_incoming(a, block_a)
        phi.add_incoming(b, block_b)
        return phi


def _address_type(ty):
    return ty == types.voidptr or isinstance(ty, (types.CPointer, types.RawPointer,
                                                  types.Integer))


def _lowered(restype: types.Type,
             emit: Callable[..., Any]) -> Callable[[Function], Function]:
    """Make a declared function (its signature and docstring) callable in
    nopython code, returning *restype* and lowered in place by ``emit(emitter,
    *args)``: the parameters in ``_POINTERS`` are addresses (a pointer or an
    integer; ``i8*`` to *emit*), the others integers (``i64``)."""
    def register(stub: Function) -> Function:
        name = stub.__name__
        pysig = inspect.signature(stub)
        params = list(pysig.parameters)

        def typer(*args, **kws):
            bound = pysig.bind(*args, **kws)
            for param, ty in bound.arguments.items():
                pointer = param in _POINTERS
                if not (_address_type(ty) if pointer else isinstance(ty, types.Integer)):
                    raise NopythonUsageError("%s: %s must be %s, got %s" % (
                        name, param, "an address (voidptr or an integer)" if pointer
                        else "an integer", ty))
            return restype
        typer.__signature__ = pysig.replace(  # type: ignore[attr-defined]
            parameters=[p.replace(annotation=inspect.Parameter.empty)
                        for p in pysig.parameters.values()],
            return_annotation=inspect.Signature.empty)
        type_callable(stub)(lambda context: typer)

        @lower_builtin(stub, types.VarArg(types.Any))
        def lower(context, builder, sig, args):
            values = []
            for param, ty, value in zip(params, sig.args, args):
                if param not in _POINTERS:
                    value = context.cast(builder, value, ty, types.int64)
                elif isinstance(ty, types.Integer):
                    value = builder.inttoptr(value, ir.IntType(8).as_pointer())
                else:
                    value = builder.bitcast(value, ir.IntType(8).as_pointer())
                values.append(value)
            return emit(_Emitter(context, builder), *values)
        return stub
    return register


# -- the call frame ---------------------------------------------------------------

def _emit_is_metadata_query(e, frame):
    ext = e.ptr(frame, _FRAME_EXT)
    i32 = ir.IntType(32)
    return e.choose(cgutils.is_null(e.builder, ext), lambda: ir.Constant(ir.IntType(1), 0),
                    lambda: e.builder.icmp_signed("==", e.i32(ext, _EXT_TYPE),
                                                  i32(_EXTENSION_METADATA)))


@_lowered(types.boolean, _emit_is_metadata_query)
def is_metadata_query(frame: int) -> bool:
    """True when XLA asks for the handler's metadata: the handler must then
    only return :func:`answer_metadata_query`."""
    raise NotImplementedError("only in nopython code")


def _emit_answer(e, frame, traits, major, minor):
    builder, i32 = e.builder, ir.IntType(32)
    meta = e.ptr(e.ptr(frame, _FRAME_EXT), _EXT_METADATA)
    api = e.ptr(frame, _FRAME_API)
    no_api = cgutils.is_null(builder, api)
    for offset, value in ((_META_MAJOR, e.choose(no_api, lambda: builder.trunc(major, i32),
                                                 lambda: e.i32(api, _API_MAJOR))),
                          (_META_MINOR, e.choose(no_api, lambda: builder.trunc(minor, i32),
                                                 lambda: e.i32(api, _API_MINOR))),
                          (_META_TRAITS, builder.trunc(traits, i32))):
        builder.store(value, _field(e.context, builder, meta, ir.IntType(64)(offset),
                                    types.int32))
    return ir.Constant(ir.IntType(8).as_pointer(), None)


@_lowered(types.voidptr, _emit_answer)
def answer_metadata_query(frame: int, traits: int, major: int, minor: int) -> int:
    """Answer the metadata query with the handler's API version (the running
    XLA's when the frame carries its API table, else *major*, *minor*) and
    *traits*; returns NULL (success)."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int32, lambda e, frame: e.i32(frame, _FRAME_STAGE))
def execution_stage(frame: int) -> int:
    """The stage XLA calls the handler for (``STAGE_EXECUTE`` etc.)."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int64, lambda e, frame: e.i64(frame, _FRAME_ARGS + _SIZE))
def num_args(frame: int) -> int:
    """The number of arguments (buffers) of the call."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int64, lambda e, frame: e.i64(frame, _FRAME_RETS + _SIZE))
def num_rets(frame: int) -> int:
    """The number of results (buffers) of the call."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.voidptr, lambda e, frame, i: e.ptr(e.ptr(frame, _FRAME_ARGS + _ITEMS), e.times(8, i)))
def arg_buffer(frame: int, i: int) -> int:
    """The ``XLA_FFI_Buffer*`` of argument *i*."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.voidptr, lambda e, frame, i: e.ptr(e.ptr(frame, _FRAME_RETS + _ITEMS), e.times(8, i)))
def ret_buffer(frame: int, i: int) -> int:
    """The ``XLA_FFI_Buffer*`` of result *i*."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int32, lambda e, buf: e.i32(buf, _BUF_DTYPE))
def buffer_dtype(buf: int) -> int:
    """The ``XLA_FFI_DataType`` of buffer *buf* (see :data:`DTYPES`)."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.voidptr, lambda e, buf: e.ptr(buf, _BUF_DATA))
def buffer_data(buf: int) -> int:
    """The device address of buffer *buf*'s data."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int64, lambda e, buf: e.i64(buf, _BUF_RANK))
def buffer_rank(buf: int) -> int:
    """The number of dimensions of buffer *buf*."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int64, lambda e, buf, d: e.i64(e.ptr(buf, _BUF_DIMS), e.times(8, d)))
def buffer_dim(buf: int, d: int) -> int:
    """The extent of dimension *d* of buffer *buf*."""
    raise NotImplementedError("only in nopython code")


def buffer_as_array(buf: int, ndim: int, dtype: DTypeLike) -> np.ndarray:
    """A C-ordered array view of a buffer: ``buffer_as_array(buf, 2,
    np.float32)`` (*ndim* and *dtype* constants)."""
    raise NotImplementedError("only in nopython code")


@overload(buffer_as_array, prefer_literal=True)
def _buffer_as_array(buf, ndim, dtype):
    if not (isinstance(ndim, types.IntegerLiteral) and 0 <= ndim.literal_value <= _MAX_NDIM):
        raise NopythonUsageError("buffer_as_array: ndim must be a constant integer from 0 to "
                                 "%d, got %s" % (_MAX_NDIM, ndim))
    _constant_dtype(dtype, "buffer_as_array", tuple(DTYPES))
    load_shape = _make_load(types.UniTuple(types.int64, ndim.literal_value))

    def impl(buf, ndim, dtype):
        return numba.carray(buffer_data(buf), load_shape(_load_ptr(buf, _BUF_DIMS), 0), dtype)
    return impl


def emit_buffer_view(context, builder, buf, ty, itemsize=None):
    """Lowering code: the C-ordered array of Numba type *ty* viewing XLA
    buffer *buf* (an ``i8*``), built in place: what :func:`buffer_as_array`
    gives, with no function compiled for the dtype and rank. *itemsize* (an
    ``i64``): the buffer's item size, known at run time, where *ty*'s dtype
    stands for the dtype of any signature of a layout (a handler body shared
    by them)."""
    from numba.np.arrayobj import populate_array

    i64 = ir.IntType(64)
    data = builder.load(_field(context, builder, buf, i64(_BUF_DATA), types.voidptr))
    dims = builder.load(_field(context, builder, buf, i64(_BUF_DIMS), types.voidptr))
    shape = [builder.load(_field(context, builder, dims, i64(8 * d), types.int64))
             for d in range(ty.ndim)]
    if itemsize is None:
        itemsize = i64(context.get_abi_sizeof(context.get_data_type(ty.dtype)))
    strides = [itemsize]
    for extent in reversed(shape[1:]):
        strides.insert(0, builder.mul(strides[0], extent))
    ary = context.make_array(ty)(context, builder)
    populate_array(ary, data=builder.bitcast(data, ary.data.type),
                   shape=cgutils.pack_array(builder, shape, i64),
                   strides=cgutils.pack_array(builder, strides[:ty.ndim], i64),
                   itemsize=itemsize, meminfo=None)
    return ary._getvalue()


def _name_key(name, fn):
    if not isinstance(name, types.StringLiteral):
        raise NopythonUsageError("%s: the attribute name must be a string constant, got %s"
                          % (fn, name))
    return tuple(name.literal_value.encode())


def attr_index(frame: int, name: str) -> int:
    """Index of attribute *name* (a string constant), or -1."""
    raise NotImplementedError("only in nopython code")


@overload(attr_index, prefer_literal=True)
def _attr_index(frame, name):
    key = _name_key(name, "attr_index")
    n = len(key)

    def impl(frame, name):
        names = _load_ptr(frame, _FRAME_ATTRS + _ITEMS)
        for i in range(_load_i64(frame, _FRAME_ATTRS + _SIZE)):
            span = _load_ptr(names, 8 * i)
            if _load_i64(span, 8) != n:
                continue
            chars = _load_ptr(span, 0)
            same = True
            for j in range(n):
                if _load_u8(chars, j) != key[j]:
                    same = False
                    break
            if same:
                return i
        return -1
    return impl


@cached_jitable
def _typed_attr(frame, i, kind):
    """The value of attribute *i* if it is of *kind* (a scalar: of a decoded type), else NULL."""
    if i < 0 or _load_i32(_load_ptr(frame, _FRAME_ATTRS + _TYPES), 4 * i) != kind:
        return _null()
    v = _load_ptr(_load_ptr(frame, _FRAME_ATTRS + _ATTR_VALUES), 8 * i)
    if kind == _ATTR_SCALAR:
        code = _load_i32(v, 0)
        known = False
        for c in _SCALAR_CODES:
            if code == c:
                known = True
        if not known:
            return _null()
    return v


@cached_jitable
def _is_float_code(code):
    return code == _F32 or code == _F64 or code == _F16 or code == _BF16


@cached_jitable
def _float_value(code, value):
    if code == _F32:
        return np.float64(_load_f32(value, 0))
    if code == _F64:
        return _load_f64(value, 0)
    if code == _F16:
        return half_bits_to_float(_load_u16(value, 0))
    return bfloat16_bits_to_float(_load_u16(value, 0))


@cached_jitable
def _int_value(code, value):
    """A boolean or integer scalar at its own width (U64 above 2**63 wraps)."""
    if code == 1 or code == 6:
        return np.int64(_load_u8(value, 0))
    if code == 2:
        v = np.int64(_load_u8(value, 0))
        return v - 256 if v > 127 else v
    if code == 7:
        return np.int64(_load_u16(value, 0))
    if code == 3:
        v = np.int64(_load_u16(value, 0))
        return v - 65536 if v > 32767 else v
    if code == 4:
        return np.int64(_load_i32(value, 0))
    if code == 8:
        return np.int64(_load_i32(value, 0)) & 0xFFFFFFFF
    return _load_i64(value, 0)


@cached_jitable
def _scalar_as_float(scalar):
    code = _load_i32(scalar, 0)
    value = _load_ptr(scalar, 8)
    if _is_float_code(code):
        return _float_value(code, value)
    return np.float64(_int_value(code, value))


@cached_jitable
def _scalar_as_int(scalar):
    """As int64, a float truncated toward zero."""
    code = _load_i32(scalar, 0)
    value = _load_ptr(scalar, 8)
    if _is_float_code(code):
        return np.int64(_float_value(code, value))
    return _int_value(code, value)


def _attribute_getter(stub, kind, read, default):
    """Overload nopython getter *stub*: ``read(value)`` of attribute *name* of
    *kind*, else *default*; a converter as *default* (``np.int64``) makes it
    a parameter."""
    pyname = stub.__name__
    if callable(default):
        convert = default

        def typer_with_default(frame, name, default=0):
            _name_key(name, pyname)

            def impl(frame, name, default=0):
                v = _typed_attr(frame, attr_index(frame, name), kind)
                return convert(default) if _is_null(v) else read(v)
            return impl
        overload(stub, prefer_literal=True)(typer_with_default)
    else:
        def typer(frame, name):
            _name_key(name, pyname)

            def impl(frame, name):
                v = _typed_attr(frame, attr_index(frame, name), kind)
                return default if _is_null(v) else read(v)
            return impl
        overload(stub, prefer_literal=True)(typer)


_count = register_jitable(lambda v: _load_i64(v, 8))


def attr_int(frame: int, name: str, default: int = 0) -> int:
    """Scalar attribute *name* (a constant) as int64 (a float one truncated),
    or *default* if absent or of a type the reader does not decode."""
    raise NotImplementedError("attr_int() is only callable from nopython code")


def attr_float(frame: int, name: str, default: float = 0) -> float:
    """Scalar attribute *name* (a constant) as float64 (F16 and BF16
    included), or *default* if absent or of a type the reader does not
    decode."""
    raise NotImplementedError("attr_float() is only callable from nopython code")


def attr_string_len(frame: int, name: str) -> int:
    """Length of string attribute *name* (-1 if absent)."""
    raise NotImplementedError("attr_string_len() is only callable from nopython code")


def attr_array_size(frame: int, name: str) -> int:
    """Element count of array attribute *name* (-1 if absent)."""
    raise NotImplementedError("attr_array_size() is only callable from nopython code")


_attribute_getter(attr_int, _ATTR_SCALAR, _scalar_as_int, np.int64)
_attribute_getter(attr_float, _ATTR_SCALAR, _scalar_as_float, np.float64)
_attribute_getter(attr_string_len, _ATTR_STRING, _count, -1)
_attribute_getter(attr_array_size, _ATTR_ARRAY, _count, -1)


def attr_string_data(frame: int, name: str) -> int:
    """Pointer to the bytes of string attribute *name* (NULL if absent)."""
    raise NotImplementedError("only in nopython code")


@overload(attr_string_data, prefer_literal=True)
def _attr_string_data(frame, name):
    _name_key(name, "attr_string_data")

    def impl(frame, name):
        v = _typed_attr(frame, attr_index(frame, name), _ATTR_STRING)
        return v if _is_null(v) else _load_ptr(v, 0)
    return impl


def attr_array_data(frame: int, name: str, dtype: DTypeLike) -> np.ndarray:
    """Array attribute *name* as a 1-D array of *dtype* (empty if absent or
    of another element type). XLA's array attributes hold int8-64, uint8-64,
    float32 or float64 elements; another *dtype* is a typing error."""
    raise NotImplementedError("only in nopython code")


def _constant_dtype(dtype, fn, allowed):
    """The NumPy dtype a nopython ``dtype`` argument (a constant) names, if one of *allowed*."""
    from numba.np.numpy_support import as_dtype

    try:
        np_dtype = as_dtype(dtype.dtype) if isinstance(dtype, types.DTypeSpec) else None
    except Exception:
        np_dtype = None
    if np_dtype is None or np_dtype not in allowed:
        raise NopythonUsageError("%s: dtype must be one of %s (a NumPy scalar type such as "
                          "np.float32), got %s"
                          % (fn, ", ".join(str(d) for d in allowed), dtype))
    return np_dtype


@overload(attr_array_data, prefer_literal=True)
def _attr_array_data(frame, name, dtype):
    _name_key(name, "attr_array_data")
    code = DTYPES[_constant_dtype(dtype, "attr_array_data", _ARRAY_ATTR_DTYPES)]

    def impl(frame, name, dtype):
        arr = _typed_attr(frame, attr_index(frame, name), _ATTR_ARRAY)
        if _is_null(arr) or _load_i32(arr, 0) != code:
            return numba.carray(_null(), (0,), dtype)
        return numba.carray(_load_ptr(arr, 16), (_load_i64(arr, 8),), dtype)
    return impl


def _emit_stream(e, frame):
    args = e.args_struct(32, 32)  # XLA_FFI_Stream_Get_Args_STRUCT_SIZE
    e.store(types.voidptr, args, 16, e.ptr(frame, _FRAME_CTX))
    err = e.call_api(frame, _API_STREAM_GET, args)

    def give_back():
        # XLA allocated the error: give it back (XLA:CPU fails every call)
        destroy = e.args_struct(24, 24)  # XLA_FFI_Error_Destroy_Args_STRUCT_SIZE
        e.store(types.voidptr, destroy, 16, err)
        e.call_api(frame, _API_ERROR_DESTROY, destroy)
        return ir.Constant(err.type, None)
    return e.choose(cgutils.is_null(e.builder, err), lambda: e.ptr(args, 24), give_back)


@_lowered(types.voidptr, _emit_stream)
def stream(frame: int) -> int:
    """The platform stream of the call (a ``CUstream`` on CUDA), or NULL
    where the platform has none (XLA:CPU)."""
    raise NotImplementedError("only in nopython code")


def _emit_error(e, frame, message, code=None):
    args = e.args_struct(32, 28)  # XLA_FFI_Error_Create_Args_STRUCT_SIZE
    e.store(types.voidptr, args, 16, message)
    code = ir.Constant(ir.IntType(32), _ERROR_INTERNAL) if code is None \
        else e.builder.trunc(code, ir.IntType(32))
    e.store(types.int32, args, 24, code)
    return e.call_api(frame, _API_ERROR_CREATE, args)


@_lowered(types.voidptr, _emit_error)
def error(frame: int, message: int, code: int = _ERROR_INTERNAL) -> int:
    """An ``XLA_FFI_Error*`` with *message* (a NUL-terminated ``voidptr``)
    to return from the handler; XLA copies the message."""
    raise NotImplementedError("only in nopython code")


def launch_error(frame: int, status: int, context: str) -> int:
    """An ``XLA_FFI_Error*`` for a failed launch: the message is *context*
    (a string constant, e.g. the kernel's name) with the driver's error name
    and code, e.g. ``"... failed: CUDA_ERROR_INVALID_VALUE (1)"``."""
    raise NotImplementedError("only in nopython code")


@overload(launch_error, prefer_literal=True)
def _launch_error(frame, status, context):
    prefix = bytes(_name_key(context, "launch_error")).decode() + " failed: "

    def impl(frame, status, context):
        return _launch_failed(frame, status, c_string(prefix))
    return impl


def emit_snprintf(builder, buf, size, fmt, *values):
    """Emit ``snprintf(buf, size, fmt, values...)`` (*size* an ``i64``); its
    ``i32`` result."""
    i8p = ir.IntType(8).as_pointer()
    fnty = ir.FunctionType(ir.IntType(32), [i8p, ir.IntType(64), i8p], var_arg=True)
    snprintf = cgutils.get_or_insert_function(builder.module, fnty, "snprintf")
    return builder.call(snprintf, [buf, size, fmt] + list(values))


def _emit_launch_failed(e, frame, status, context):
    b, i64 = e.builder, ir.IntType(64)
    voidp = ir.IntType(8).as_pointer()
    name = _emit_error_name(e.context, b, status)
    name = b.select(cgutils.is_null(b, name), _text(e, ""), name)
    buf = b.bitcast(stack_buffer(b, 256), voidp)
    written = b.sext(emit_snprintf(b, buf, i64(256), _text(e, "%.240s"), context), i64)
    room = b.sub(i64(240), written)  # the name: at most 64 bytes, within the 240
    room = b.select(b.icmp_signed("<", room, i64(64)), room, i64(64))
    emit_snprintf(b, b.gep(buf, [written]), b.sub(i64(256), written),
                  _text(e, "%.*s (%lld)"), b.trunc(room, ir.IntType(32)), name, status)
    return _emit_error(e, frame, buf)


@_lowered(types.voidptr, _emit_launch_failed)
def _launch_failed(frame: int, status: int, context: int) -> int:
    """:func:`launch_error` with the message's start given as a C string
    (*context*, e.g. ``"... kernel 'k' failed: "``, cut to 240 bytes), the
    driver's name of *status* (the package's names where no driver names it)
    and its code: ``"... failed: CUDA_ERROR_INVALID_VALUE (1)"``. Lowered in
    place."""
    raise NotImplementedError("only in nopython code")


# -- checking a call frame against a signature ----------------------------------
# What XLA's C++ binding (xla/ffi/api/api.h) checks before it calls a typed
# handler: the numbers of arguments and results, that each is a buffer of the
# element type and rank the handler takes, that each attribute it reads is
# there with the type it reads, and that the call has no other attribute. Read
# unchecked, a frame that differs is memory read out of bounds (a crash) or a
# value of another type (a wrong result). A check costs a few loads and
# compares; a message is made only when one fails.

_BUFFER = 1  # XLA_FFI_ArgType_BUFFER and XLA_FFI_RetType_BUFFER
_INVALID_ARGUMENT = 3  # XLA_FFI_Error_Code_INVALID_ARGUMENT
_MESSAGE_BYTES = 512
#: XLA_FFI_DataType names (c_api.h), NumPy's where NumPy has the type.
_XLA_TYPE_NAMES = {
    0: "invalid", 1: "bool", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "uint8",
    7: "uint16", 8: "uint32", 9: "uint64", 10: "float16", 11: "float32", 12: "float64",
    15: "complex64", 16: "bfloat16", 17: "token", 18: "complex128", 19: "float8_e5m2",
    20: "float8_e4m3fn", 21: "int4", 22: "uint4", 23: "float8_e4m3b11fnuz",
    24: "float8_e5m2fnuz", 25: "float8_e4m3fnuz", 26: "int2", 27: "uint2", 28: "float8_e4m3",
    29: "float8_e3m4", 30: "int1", 31: "uint1", 32: "float4_e2m1fn", 33: "float8_e8m0fnu"}
_ATTR_KIND_NAMES = {_ATTR_ARRAY: "an array", 2: "a dictionary", _ATTR_SCALAR: "a scalar",
                    _ATTR_STRING: "a string"}


def _emit_name(context, builder, names, value, unknown=None):
    """Lowering code: the C string naming *value* (an ``i64``) in *names*
    ({code: name}), else the C string *unknown* (None: NULL)."""
    found = (ir.Constant(ir.IntType(8).as_pointer(), None) if unknown is None
             else _global_bytes(context, builder, unknown.encode() + b"\0"))
    for key, text in names.items():
        hit = builder.icmp_signed("==", value, ir.Constant(ir.IntType(64), key))
        found = builder.select(hit, _global_bytes(context, builder, text.encode() + b"\0"),
                               found)
    return found


def _name_table(names):
    """An intrinsic ``(code) -> voidptr``: the C string naming *code* in
    *names* ({code: name}), or NULL."""
    @intrinsic
    def name_of(typingctx, code):
        def codegen(context, builder, sig, args):
            value = context.cast(builder, args[0], sig.args[0], types.int64)
            return _emit_name(context, builder, names, value)
        return types.voidptr(code), codegen
    return name_of


def stack_buffer(builder, size):
    """An uninitialised ``[size x i8]`` in the entry block of the function
    being lowered (``cgutils.alloca_once`` zero-fills on every call: a
    memset, where snprintf writes the text and its NUL anyway)."""
    with builder.goto_entry_block():
        return builder.alloca(ir.ArrayType(ir.IntType(8), size))


def emit_formatted(context, builder, fmt, values, value_types, size=_MESSAGE_BYTES):
    """A message formatted by ``snprintf`` from C string *fmt* and *values*
    (integers and booleans widened to ``int64``, for ``%lld``), in a stack
    buffer of *size* bytes of the function it is lowered in; its ``i8*``."""
    i8p = ir.IntType(8).as_pointer()
    values = [context.cast(builder, v, t, types.int64)
              if isinstance(t, (types.Integer, types.Boolean)) else v
              for v, t in zip(values, value_types)]
    buf = builder.bitcast(stack_buffer(builder, size), i8p)
    emit_snprintf(builder, buf, ir.Constant(ir.IntType(64), size), fmt, *values)
    return buf


@intrinsic
def report(typingctx, frame, fmt, *values):
    """``report(frame, fmt, *values)``: an ``XLA_FFI_Error*`` (INVALID_ARGUMENT)
    whose message is printf format *fmt* (a C string, ``c_string("...")``)
    applied to the values (integers ``%lld``, C strings ``%s``), formatted in
    a stack buffer of the function it is lowered in: a frame that does not
    match what the handler takes. Lowered in place, not typed as a function
    of its own for each combination of argument types."""
    def codegen(context, builder, sig, args):
        message = emit_formatted(context, builder, args[1], cgutils.unpack_tuple(
            builder, args[2]), sig.args[2].types)
        e = _Emitter(context, builder)
        return _emit_error(e, builder.bitcast(args[0], ir.IntType(8).as_pointer()), message,
                           ir.Constant(ir.IntType(64), _INVALID_ARGUMENT))
    return types.voidptr(frame, fmt, types.StarArgTuple.from_types(values)), codegen


_COUNTS_TEXT = ("%s: the call has %lld argument(s) and %lld result(s); the handler takes %lld "
                "and %lld")
_NOT_BUFFER_TEXT = ("%s: %s %lld is not a buffer (its XLA FFI type is %lld); the handler takes "
                    "buffers only")


@cached_jitable
def check_items(frame, n_args, n_rets, context):
    """NULL when the call has *n_args* arguments and *n_rets* results, each a
    buffer; else the error saying what it has."""
    got_args, got_rets = num_args(frame), num_rets(frame)
    if got_args != n_args or got_rets != n_rets:
        return report(frame, c_string(_COUNTS_TEXT), context, got_args, got_rets, n_args, n_rets)
    arg_types = _load_ptr(frame, _FRAME_ARGS + _TYPES)
    for i in range(got_args):
        kind = _load_i32(arg_types, 4 * i)
        if kind != _BUFFER:
            return report(frame, c_string(_NOT_BUFFER_TEXT), context, c_string("argument"), i, kind)
    ret_types = _load_ptr(frame, _FRAME_RETS + _TYPES)
    for i in range(got_rets):
        kind = _load_i32(ret_types, 4 * i)
        if kind != _BUFFER:
            return report(frame, c_string(_NOT_BUFFER_TEXT), context, c_string("result"), i, kind)
    return _null()


def _emit_report(e, frame, fmt, *values):
    """Lowering code of :func:`report`: *values* are ``i64`` or ``i8*``."""
    types_ = [types.int64 if isinstance(v.type, ir.IntType) else types.voidptr for v in values]
    message = emit_formatted(e.context, e.builder,
                             _global_bytes(e.context, e.builder, fmt.encode() + b"\0"),
                             values, types_)
    return _emit_error(e, frame, message, ir.Constant(ir.IntType(64), _INVALID_ARGUMENT))


def _text(e, text):
    return _global_bytes(e.context, e.builder, text.encode() + b"\0")


def _type_name(e, code):
    return _emit_name(e.context, e.builder, _XLA_TYPE_NAMES, code, "an unknown XLA type")


def _emit_check_buffer(e, frame, is_ret, i, code, ndim, context):
    builder, i64 = e.builder, ir.IntType(64)
    ret = builder.icmp_signed("!=", is_ret, i64(0))
    what = builder.select(ret, _text(e, "result"), _text(e, "argument"))
    n = builder.select(ret, e.i64(frame, _FRAME_RETS + _SIZE), e.i64(frame, _FRAME_ARGS + _SIZE))

    def buffer_error():
        table = builder.select(ret, e.ptr(frame, _FRAME_RETS + _ITEMS),
                               e.ptr(frame, _FRAME_ARGS + _ITEMS))
        buf = e.ptr(table, e.times(8, i))
        got, rank = builder.sext(e.i32(buf, _BUF_DTYPE), i64), e.i64(buf, _BUF_RANK)
        differs = builder.or_(builder.icmp_signed("!=", got, code),
                              builder.icmp_signed("!=", rank, ndim))
        return e.choose(differs, lambda: _emit_report(
            e, frame, "%s: %s %lld is %s of rank %lld; the handler takes %s of rank %lld",
            context, what, i, _type_name(e, got), rank, _type_name(e, code), ndim),
            lambda: ir.Constant(ir.IntType(8).as_pointer(), None))
    outside = builder.or_(builder.icmp_signed("<", i, i64(0)), builder.icmp_signed(">=", i, n))
    return e.choose(outside, lambda: _emit_report(
        e, frame, "%s: the call has no %s %lld (it has %lld)", context, what, i, n),
        buffer_error)


@_lowered(types.voidptr, _emit_check_buffer)
def check_buffer(frame: int, is_ret: int, i: int, code: int, ndim: int, context: int) -> int:
    """NULL when result (*is_ret*) or argument *i* is there, of XLA type
    *code* and rank *ndim*; else the error saying what it is."""
    raise NotImplementedError("only in nopython code")


def _emit_check_scalar_attr(e, frame, i, name, code, context):
    builder, i64 = e.builder, ir.IntType(64)
    want = _type_name(e, code)

    def present():
        kind = builder.sext(e.i32(e.ptr(frame, _FRAME_ATTRS + _TYPES), e.times(4, i)), i64)

        def scalar():
            got = builder.sext(e.i32(_emit_attr_value(e, frame, i), 0), i64)
            return e.choose(builder.icmp_signed("!=", got, code), lambda: _emit_report(
                e, frame, "%s: attribute '%s' is a scalar of %s; the handler reads a scalar "
                "of %s", context, name, _type_name(e, got), want),
                lambda: ir.Constant(ir.IntType(8).as_pointer(), None))
        return e.choose(builder.icmp_signed("!=", kind, i64(_ATTR_SCALAR)), lambda: _emit_report(
            e, frame, "%s: attribute '%s' is %s; the handler reads a scalar of %s", context, name,
            _emit_name(e.context, builder, _ATTR_KIND_NAMES, kind, "of an unknown kind"), want),
            scalar)
    return e.choose(builder.icmp_signed("<", i, i64(0)), lambda: _emit_report(
        e, frame, "%s: the call has no attribute '%s'; the handler reads it as a scalar of %s",
        context, name, want), present)


@_lowered(types.voidptr, _emit_check_scalar_attr)
def check_scalar_attr(frame: int, i: int, name: int, code: int, context: int) -> int:
    """NULL when attribute *i* (from :func:`attr_index`; -1: absent) named
    *name* (a C string) is a scalar of XLA type *code*; else the error
    saying it is missing or what it is."""
    raise NotImplementedError("only in nopython code")


def _emit_unknown_attr_error(e, frame, i, reads, context):
    builder, i64 = e.builder, ir.IntType(64)
    # the name NUL-terminated (XLA's names are spans), cut to 200 bytes
    span = e.ptr(e.ptr(frame, _FRAME_ATTRS + _ITEMS), e.times(8, i))
    length = e.i64(span, 8)
    n = builder.select(builder.icmp_signed("<", length, i64(200)), length, i64(200))
    name = builder.bitcast(stack_buffer(builder, 208), ir.IntType(8).as_pointer())
    cgutils.raw_memcpy(builder, name, e.ptr(span, 0), n, 1)
    builder.store(ir.Constant(ir.IntType(8), 0), builder.gep(name, [n]))
    return _emit_report(e, frame, "%s: the call has attribute '%s', which the handler does not "
                        "read (it reads %s)", context, name, reads)


@_lowered(types.voidptr, _emit_unknown_attr_error)
def unknown_attr_error(frame: int, i: int, reads: int, context: int) -> int:
    """The error for attribute *i*, which the handler does not read (*reads*:
    a C string naming those it reads)."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int64, lambda e, frame: e.i64(frame, _FRAME_ATTRS + _SIZE))
def num_attrs(frame: int) -> int:
    """The number of attributes of the call."""
    raise NotImplementedError("only in nopython code")


def _emit_name_is(e, frame, i, key, n):
    builder, i64 = e.builder, ir.IntType(64)
    span = e.ptr(e.ptr(frame, _FRAME_ATTRS + _ITEMS), e.times(8, i))
    false = ir.Constant(ir.IntType(1), 0)

    def same_length():
        chars = e.ptr(span, 0)
        words = builder.and_(builder.icmp_signed("<=", i64(8), n),
                             builder.icmp_signed("<=", n, i64(16)))

        def two_words():  # the names handlers read: two words, which may overlap
            last = builder.sub(n, i64(8))
            word = functools.partial(e.load, types.uint64, align=1)  # wherever aligned
            return builder.and_(builder.icmp_unsigned("==", word(chars, 0), word(key, 0)),
                                builder.icmp_unsigned("==", word(chars, last), word(key, last)))

        def compare():
            i8p = ir.IntType(8).as_pointer()
            fnty = ir.FunctionType(ir.IntType(32), [i8p, i8p, i64])
            memcmp = cgutils.get_or_insert_function(builder.module, fnty, "memcmp")
            return builder.icmp_signed("==", builder.call(memcmp, [chars, key, n]),
                                       ir.Constant(ir.IntType(32), 0))
        return e.choose(words, two_words, compare)
    return e.choose(builder.icmp_signed("==", e.i64(span, 8), n), same_length, lambda: false)


@_lowered(types.boolean, _emit_name_is)
def attr_name_is(frame: int, i: int, key: int, n: int) -> bool:
    """True when attribute *i*'s name is the *n* bytes at *key*."""
    raise NotImplementedError("only in nopython code")


def _emit_is_scalar(e, frame, i, code):
    builder, i32 = e.builder, ir.IntType(32)
    kind = e.i32(e.ptr(frame, _FRAME_ATTRS + _TYPES), e.times(4, i))
    return e.choose(builder.icmp_signed("==", kind, i32(_ATTR_SCALAR)),
                    lambda: builder.icmp_signed("==", e.i32(_emit_attr_value(e, frame, i), 0),
                                                builder.trunc(code, i32)),
                    lambda: ir.Constant(ir.IntType(1), 0))


@_lowered(types.boolean, _emit_is_scalar)
def attr_is_scalar(frame: int, i: int, code: int) -> bool:
    """True when attribute *i* is a scalar of XLA type *code*."""
    raise NotImplementedError("only in nopython code")


def _emit_attr_value(e, frame, i):
    return e.ptr(e.ptr(frame, _FRAME_ATTRS + _ATTR_VALUES), e.times(8, i))


@_lowered(types.voidptr, _emit_attr_value)
def _attr_value(frame: int, i: int) -> int:
    """The value pointer of attribute *i* (for a scalar: ``{dtype, value*}``)."""
    raise NotImplementedError("only in nopython code")


@_lowered(types.int64, lambda e, frame, i: e.i64(e.ptr(_emit_attr_value(e, frame, i), 8), 0))
def attr_i64_at(frame: int, i: int) -> int:
    """Scalar attribute *i*, checked to be an S64 (jax_handler's check of the signature)."""
    raise NotImplementedError("only in nopython code")


def emit_scalar_at(context, builder, frame, i, fe_type):
    """Lowering code: scalar attribute *i* (``int64``) of *frame*, checked to
    be of XLA's type for Numba type *fe_type* (jax_handler's check of the signature), loaded
    as such: no conversion from the other scalar types compiled."""
    scalar = _emit_attr_value(_Emitter(context, builder), frame, i)
    value = builder.load(_field(context, builder, scalar, ir.IntType(64)(8), types.voidptr))
    return builder.load(_field(context, builder, value, ir.IntType(64)(0), fe_type))


@cached_jitable
def attr_int_at(frame, i):
    """Scalar attribute *i* (checked to be one) as int64."""
    return _scalar_as_int(_attr_value(frame, i))


@cached_jitable
def attr_float_at(frame, i):
    """Scalar attribute *i* (checked to be one) as float64."""
    return _scalar_as_float(_attr_value(frame, i))


if TYPE_CHECKING:
    def is_error(err: int) -> bool:
        """True when *err* (an ``XLA_FFI_Error*``) is an error, not NULL."""
else:
    @intrinsic
    def is_error(typingctx, err):
        """``is_error(err)``: True when *err* (a check's or another call's
        ``XLA_FFI_Error*``) is an error, not NULL: return it from the handler."""
        if err != types.voidptr:
            raise NopythonUsageError("is_error() takes an XLA_FFI_Error* (voidptr), got %s"
                                     % err)

        def codegen(context, builder, sig, args):
            return cgutils.is_not_null(builder, args[0])
        return types.boolean(err), codegen


def _context_text(context, fn):
    if not isinstance(context, types.StringLiteral):
        raise NopythonUsageError("%s: the context (how messages name the handler) must be a "
                                 "string constant, got %s" % (fn, context))
    return context.literal_value


def _constant_ndim(ndim, fn):
    if not (isinstance(ndim, types.IntegerLiteral) and 0 <= ndim.literal_value <= _MAX_NDIM):
        raise NopythonUsageError("%s: ndim must be a constant integer from 0 to %d, got %s"
                                 % (fn, _MAX_NDIM, ndim))
    return ndim.literal_value


def check_call(frame: int, n_args: int, n_rets: int, context: str) -> int:
    """NULL when the call has *n_args* arguments and *n_rets* results, all
    buffers; else an ``XLA_FFI_Error*`` (INVALID_ARGUMENT) saying what the
    call has, its message beginning with *context* (a string constant)."""
    raise NotImplementedError("only in nopython code")


@overload(check_call, prefer_literal=True)
def _check_call(frame, n_args, n_rets, context):
    _context_text(context, "check_call")

    def impl(frame, n_args, n_rets, context):
        return check_items(frame, n_args, n_rets, c_string(context))
    return impl


def check_arg(frame: int, i: int, dtype: DTypeLike, ndim: int, context: str) -> int:
    """NULL when argument *i* is a buffer of *dtype* and rank *ndim*
    (constants); else an ``XLA_FFI_Error*`` naming what it is."""
    raise NotImplementedError("only in nopython code")


def check_ret(frame: int, i: int, dtype: DTypeLike, ndim: int, context: str) -> int:
    """NULL when result *i* is a buffer of *dtype* and rank *ndim*
    (constants); else an ``XLA_FFI_Error*`` naming what it is."""
    raise NotImplementedError("only in nopython code")


def _buffer_check(fn, is_ret):
    is_ret = int(is_ret)

    def typer(frame, i, dtype, ndim, context):
        code = DTYPES[_constant_dtype(dtype, fn, tuple(DTYPES))]
        rank = _constant_ndim(ndim, fn)
        _context_text(context, fn)

        def impl(frame, i, dtype, ndim, context):
            return check_buffer(frame, is_ret, i, code, rank, c_string(context))
        return impl
    return typer


overload(check_arg, prefer_literal=True)(_buffer_check("check_arg", False))
overload(check_ret, prefer_literal=True)(_buffer_check("check_ret", True))

# the scalar types XLA gives attributes, as NumPy dtypes
_SCALAR_ATTR_DTYPES = tuple(d for d, code in DTYPES.items() if code in _SCALAR_CODES)


def check_attr(frame: int, name: str, dtype: DTypeLike, context: str) -> int:
    """NULL when the call has attribute *name* (a string constant), a
    scalar of *dtype* (a constant: bool, an integer or a float type); else
    an ``XLA_FFI_Error*`` saying it is missing or what it is."""
    raise NotImplementedError("only in nopython code")


@overload(check_attr, prefer_literal=True)
def _check_attr(frame, name, dtype, context):
    _name_key(name, "check_attr")
    code = DTYPES[_constant_dtype(dtype, "check_attr", _SCALAR_ATTR_DTYPES)]
    _context_text(context, "check_attr")

    def impl(frame, name, dtype, context):
        return check_scalar_attr(frame, attr_index(frame, name), c_string(name), code,
                                 c_string(context))
    return impl
