"""The XLA FFI handler of one :func:`~numba_cuda_launch.jax.jax_kernel` signature: a
nopython body (a ``@cfunc``) that reads the call frame (:mod:`.xla_ffi`) and launches the
kernel on C-ordered views of XLA's buffers, or preloads it in XLA's initialize stage,
entered through a few instructions that give it the signature's descriptor (its buffer
types, item sizes and kernel images). The body is put together from a few templates for
its launch variant (batch-aware or not, grid and block from attributes or a launch rule,
dependent or not) and serves every signature of one layout (ranks, scalars, the kernels'
parameter layout), so another dtype costs a descriptor, not a compile (docs/jax.md,
"How the handler is built").
"""

import ctypes
import functools
import hashlib
import inspect
import itertools
import linecache
import struct
import textwrap
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils
from numba.core import types as nt
from numba.extending import intrinsic

from numba_cuda_launch.compat.numba_cfunc import CFuncCode, cached_cfunc
from numba_cuda_launch.compat.numba_extending import cached_jitable
from numba_cuda_launch.cudadrv.image import constant_bytes, image_record_module, \
    remember_param_sizes
from numba_cuda_launch.errors import NopythonUsageError
from numba_cuda_launch.interop import xla_ffi
from numba_cuda_launch.interop.handler_cache import plan_layout, shared_library, untyped_arrays
from numba_cuda_launch.interop.kernel_call import is_launch_dim, kind
from numba_cuda_launch.launch import backends, call
from numba_cuda_launch.launch.halffloat import float_to_half_bits
from numba_cuda_launch.launch.plan import launch_signature
from numba_cuda_launch.launch.refusals import BLOCK_THREADS_MAX, LIMITS

__all__ = ["Handler", "HandlerBody", "Refusal", "bind", "described_images", "layout_key",
           "make_body", "refusal", "shared_code", "shared_functions"]


# float16 from IEEE binary16 bits: a bitcast, which needs no runtime helper
_half_from_bits = xla_ffi._make_bitcast(nt.uint16, nt.float16)


@cached_jitable
def _as_half(x):
    return _half_from_bits(float_to_half_bits(x))


# -- a rank variant's constants, as a type --------------------------------------

# What the handler reads besides the scalars: the launch configuration's
# attributes when there is no @njit launch rule ((name, required); y, z and
# sharedmem default), and sharedmem in any case.
_CONFIG_ATTRIBUTES = (("ncl_grid_x", True), ("ncl_grid_y", False), ("ncl_grid_z", False),
                      ("ncl_block_x", True), ("ncl_block_y", False), ("ncl_block_z", False))
_SHAREDMEM_ATTRIBUTE = ("ncl_sharedmem", False)
_S64 = 5  # XLA_FFI_DataType_S64: jax passes the launch attributes as int64


def _scalar_attribute_code(dtype):
    """The ``XLA_FFI_DataType`` of the attribute carrying a scalar of *dtype*
    (float16 travels as float32: XLA's attributes have no F16)."""
    return xla_ffi.DTYPES[np.dtype(np.float32 if dtype == np.float16 else dtype)]


class VariantType(nt.Dummy):
    """A rank variant of a handler: its array types (inputs, then outputs),
    how many are inputs, its scalars ``((attribute name, NumPy dtype), ...)``,
    the attributes it reads ``((name, XLA type code, required), ...)``: the
    launch configuration's (unless *rule*), sharedmem, the scalars, in that
    order), and *context*, how its messages name the kernel; *index*, its
    place in the descriptor (0 unbatched, 1 batched); *images*: whether the
    kernel's image comes from the descriptor (else the plan's, embedded).
    An instance is a constant of the handler's body, typed
    ``TypeRef(VariantType)``."""

    def __init__(self, arrays, n_in, scalars, rule, context, index, images):
        self.arrays, self.n_in, self.scalars, self.context = arrays, n_in, scalars, context
        self.rule, self.index, self.images = rule, index, images
        config = () if rule else _CONFIG_ATTRIBUTES
        self.attributes = tuple((n, _S64, req) for n, req in config + (_SHAREDMEM_ATTRIBUTE,)) \
            + tuple((n, _scalar_attribute_code(d), True) for n, d in scalars)
        self.first_scalar = len(self.attributes) - len(scalars)
        super().__init__("jax_variant(%s; %d in; %s; %s; %d; %s)" % (
            ", ".join(map(str, arrays)), n_in,
            ", ".join("%s %s" % (n, d) for n, d in scalars) or "no scalars",
            "launch rule" if rule else "launch attributes", index,
            "described images" if images else "embedded images"))

    @property
    def key(self):
        return (self.arrays, self.n_in, self.scalars, self.rule, self.context, self.index,
                self.images)


# -- lowering calls of the accessors ----------------------------------------------

def _lower_call(context, builder, fn, argtys, args):
    """``fn(*args)`` of a jitable *fn*, its defaults for the rest: the value and its type.
    A literal argument is typed by its literal type and passed as a placeholder."""
    typingctx = context.typing_context
    fnty = typingctx.resolve_value_type(fn)
    sig = typingctx.resolve_function_type(fnty, tuple(argtys), {})
    args = list(args) + [_placeholder(context, t) for t in sig.args[len(args):]]
    return context.get_function(fnty, sig)(builder, args), sig.return_type


def _placeholder(context, ty):
    """The value of an argument whose type carries it (a literal, a class, a default)."""
    if isinstance(ty, nt.IntegerLiteral):
        return context.get_constant(ty, ty.literal_value)
    return cgutils.get_null_value(context.get_value_type(ty))


# The descriptor a handler's body is given (:func:`bind`), as 8-byte words:
# the buffer tables of the unbatched and batched variants (for
# _check_signature), their image records (NULL where the plan's image is
# embedded), then each array's item size.
_DESC_TABLE, _DESC_IMAGE, _DESC_ITEMSIZE = 0, 2, 4


def _desc_word(builder, desc, index, ty):
    """Word *index* of descriptor *desc* (an ``i8*``), loaded as LLVM type *ty*."""
    ptr = builder.gep(builder.bitcast(desc, _I64.as_pointer()), [_I64(index)], inbounds=True)
    return builder.load(builder.bitcast(ptr, ty.as_pointer()))


@intrinsic
def _descriptor(typingctx, desc, variant):
    """``(buffer table, image record)`` of the *variant* in *desc*."""
    v = variant.instance_type

    def codegen(context, builder, sig, args):
        return context.make_tuple(builder, sig.return_type, [
            _desc_word(builder, args[0], _DESC_TABLE + v.index, _NULL.type),
            _desc_word(builder, args[0], _DESC_IMAGE + v.index, _NULL.type)])
    return nt.UniTuple(nt.voidptr, 2)(desc, variant), codegen


def _view(context, builder, frame, index, n_in, ty, itemsize):
    """The view of type *ty* of buffer *index* (an argument below *n_in*,
    else a result), of items of *itemsize* bytes."""
    get, i = (xla_ffi.arg_buffer, index) if index < n_in else (xla_ffi.ret_buffer, index - n_in)
    buf, _ = _lower_call(context, builder, get, (nt.voidptr, nt.intp),
                         (frame, context.get_constant(nt.intp, i)))
    return xla_ffi.emit_buffer_view(context, builder, buf, ty, itemsize)


@intrinsic
def _buffer_views(typingctx, frame, variant, desc):
    """``(inputs, outputs)``: tuples of views of XLA's buffers as the
    *variant*'s types, of the item sizes in *desc* (the types' dtypes stand
    for any of the signature's)."""
    arrays, n_in = variant.instance_type.arrays, variant.instance_type.n_in
    ins, outs = nt.Tuple(arrays[:n_in]), nt.Tuple(arrays[n_in:])

    def codegen(context, builder, sig, args):
        views = [_view(context, builder, args[0], i, n_in, ty,
                       _desc_word(builder, args[2], _DESC_ITEMSIZE + i, _I64))
                 for i, ty in enumerate(arrays)]
        return context.make_tuple(builder, sig.return_type, [
            context.make_tuple(builder, ins, views[:n_in]),
            context.make_tuple(builder, outs, views[n_in:])])
    return nt.Tuple((ins, outs))(frame, variant, desc), codegen


@intrinsic
def _launch(typingctx, cfg, variant, image, args):
    """``cfg.launch_status(*args)``, of the kernel in image record *image*
    where the *variant* says its images come from the descriptor."""
    sig = launch_signature(cfg, tuple(args), {}, return_type=nt.int32)
    images = variant.instance_type.images

    def codegen(context, builder, call_sig, values):
        return call.emit_launch(context, builder, cfg, values[0], tuple(args),
                                cgutils.unpack_tuple(builder, values[3], len(args)),
                                image=values[2] if images else None)[0]
    return sig.return_type(cfg, variant, image, args), codegen


@intrinsic
def _preload(typingctx, cfg, variant, image, args):
    """``cfg.preload(*args)``, of image record *image* as for :func:`_launch`."""
    launch_signature(cfg, tuple(args), {})
    images = variant.instance_type.images

    def codegen(context, builder, call_sig, values):
        return call.emit_preload(context, builder, cfg, tuple(args),
                                 values[2] if images else None)
    return nt.int32(cfg, variant, image, args), codegen


def _scalar(context, builder, frame, index, dtype):
    """Scalar attribute *index*, checked by the frame checks to be of
    *dtype*'s attribute type, loaded as that type (float16 arrives as F32
    and is made half bits without LLVM's helpers; a bool as one byte)."""
    if dtype == np.float16:
        value = xla_ffi.emit_scalar_at(context, builder, frame, index, nt.float32)
        value, _ = _lower_call(context, builder, _as_half, (nt.float32,), (value,))
        return value
    if dtype.kind == "b":  # PRED: one byte
        value = xla_ffi.emit_scalar_at(context, builder, frame, index, nt.uint8)
        return context.cast(builder, value, nt.uint8, nt.boolean)
    return xla_ffi.emit_scalar_at(context, builder, frame, index, numba.from_dtype(dtype))


@intrinsic
def _scalar_values(typingctx, frame, variant, indices):
    """The tuple of the *variant*'s scalars, read from the call's attributes
    at *indices* (:func:`_attribute_indices`)."""
    v = variant.instance_type
    ty = nt.Tuple([numba.from_dtype(d) for _, d in v.scalars])

    def codegen(context, builder, sig, args):
        return context.make_tuple(builder, ty, [
            _scalar(context, builder, args[0],
                    builder.extract_value(args[2], v.first_scalar + k), d)
            for k, (_, d) in enumerate(v.scalars)])
    return ty(frame, variant, indices), codegen


@intrinsic
def _shapes(typingctx, arrays):
    """``tuple(a.shape for a in arrays)``."""
    shape_types = [nt.UniTuple(nt.intp, a.ndim) for a in arrays]

    def codegen(context, builder, sig, args):
        shapes = [cgutils.create_struct_proxy(a)(context, builder, value=v).shape
                  for a, v in zip(arrays, cgutils.unpack_tuple(builder, args[0]))]
        return context.make_tuple(builder, sig.return_type, shapes)
    return nt.Tuple(shape_types)(arrays), codegen


# -- checking the call frame ----------------------------------------------------

_SIGNATURE = nt.Tuple((nt.int64, nt.int64, nt.voidptr, nt.voidptr, nt.int64,
                       nt.voidptr, nt.voidptr))


def _buffer_table(arrays):
    """The buffer table of :func:`_check_signature` for *arrays* (Numba
    array types): each one's XLA type code and rank."""
    return b"".join(struct.pack("<2q", xla_ffi.DTYPES[np.dtype(str(a.dtype))], a.ndim)
                    for a in arrays)


@intrinsic
def _signature(typingctx, variant):
    """The *variant*'s constants for xla_ffi's checks: ``(number of buffers,
    number of inputs, attribute table, attribute names, number of
    attributes, the names as one C string, context)``. The tables are those
    of :func:`xla_ffi.match_attrs` (the buffer table is the descriptor's);
    *context* names the kernel in messages."""
    v = variant.instance_type
    names = [n.encode() for n, _, _ in v.attributes]
    order = sorted(range(len(names)), key=names.__getitem__)
    offsets = list(itertools.accumulate([0] + [len(names[k]) + 1 for k in order]))
    attrs = b"".join(struct.pack("<5q", offsets[pos], len(names[k]), v.attributes[k][1],
                                 v.attributes[k][2], k) for pos, k in enumerate(order))
    name_bytes = b"".join(names[k] + b"\0" for k in order)
    reads = b", ".join(names[k] for k in order) + b"\0"
    context_bytes = v.context.encode() + b"\0"

    def codegen(context, builder, sig, args):
        def const(data):
            return xla_ffi._global_bytes(context, builder, data)
        i64 = context.get_value_type(nt.int64)
        return context.make_tuple(builder, _SIGNATURE, [
            i64(len(v.arrays)), i64(v.n_in), const(attrs), const(name_bytes),
            i64(len(names)), const(reads), const(context_bytes)])
    return _SIGNATURE(variant), codegen


@intrinsic
def _attribute_slots(typingctx, variant):
    """Room on the stack for the index of each attribute the *variant* reads."""
    n = len(variant.instance_type.attributes)

    def codegen(context, builder, sig, args):
        slots = cgutils.alloca_once(builder, ir.ArrayType(ir.IntType(64), n))
        return builder.bitcast(slots, ir.IntType(8).as_pointer())
    return nt.voidptr(variant), codegen


@intrinsic
def _attribute_indices(typingctx, slots, variant):
    """The indices :func:`_attribute_slots` holds, as a tuple."""
    ty = nt.UniTuple(nt.int64, len(variant.instance_type.attributes))

    def codegen(context, builder, sig, args):
        ptr = builder.bitcast(args[0], context.get_value_type(ty).as_pointer())
        return builder.load(ptr)
    return ty(slots, variant), codegen


# CUDA's launch limits, as the one validator of configurations states them
# (launchconfig.config_problem): a launch rule's result, known only when the
# handler runs, is checked against the same, with the same sentences.
(_GRID_MAX, _GRID_TEXT), (_BLOCK_MAX, _BLOCK_TEXT) = LIMITS["griddim"], LIMITS["blockdim"]
_BAD_GRID = "%s: griddim must be " + _GRID_TEXT + ", got (%lld, %lld, %lld) (from %s)"
_BAD_BLOCK = ("%s: blockdim must be " + _BLOCK_TEXT + " with at most " + str(BLOCK_THREADS_MAX)
              + " threads in all, got (%lld, %lld, %lld) (from %s)")
_BAD_SHAREDMEM = ("%s: sharedmem must be between 0 and 2**32-1 bytes, got %lld (from the "
                  "attribute ncl_sharedmem)")


@intrinsic
def _dim3(typingctx, dims):
    """A launch dimension (an integer or a tuple of 1 to 3 integers) as three
    int64 (missing ones 1). Lowered in place: no function of its own to
    compile and link into each handler."""
    if not is_launch_dim(dims):  # a float item would be truncated
        raise NopythonUsageError(
            "the launch rule (jax_kernel's launch=) must return (griddim, blockdim), each an "
            "integer or a tuple of 1 to 3 integers; it returned %s for one of them" % (dims,))
    items = [dims] if isinstance(dims, nt.Integer) else list(dims)
    ty = nt.UniTuple(nt.int64, 3)

    def codegen(context, builder, sig, args):
        values = [args[0]] if isinstance(dims, nt.Integer) else \
            cgutils.unpack_tuple(builder, args[0], len(items))
        values = [context.cast(builder, v, t, nt.int64) for v, t in zip(values, items)]
        return context.make_tuple(builder, ty, values + [_I64(1)] * (3 - len(values)))
    return ty(dims), codegen


@intrinsic
def _call_rule(typingctx, rule, args):
    """``(returned, result)`` of the launch rule called on the tuple *args*:
    whether it returned, and what (undefined when it raised: the caller
    reports that; the exception itself is dropped). A direct call of the
    rule's compiled function, its status checked, where a ``try``/``except``
    in the handler would bring Numba's exception handling, which made a
    handler's compile more than twice as long."""
    sig = typingctx.resolve_function_type(rule, tuple(args), {})
    ty = nt.Tuple((nt.boolean, sig.return_type))

    def codegen(context, builder, call_sig, values):
        cres = rule.dispatcher.overloads[tuple(sig.args)]
        context.add_linking_libs([cres.library])
        items = [context.cast(builder, v, t, formal) for v, t, formal in zip(
            cgutils.unpack_tuple(builder, values[1], len(args)), args, sig.args)]
        status, result = context.call_internal_no_propagate(builder, cres.fndesc, sig, items)
        return context.make_tuple(builder, ty, [builder.not_(status.is_error), result])
    return ty(rule, args), codegen


def _emit_int_attribute(e, frame, i, default):
    return e.choose(e.builder.icmp_signed("<", i, ir.Constant(i.type, 0)), lambda: default,
                    lambda: e.i64(e.ptr(xla_ffi._emit_attr_value(e, frame, i), 8), 0))


@xla_ffi._lowered(nt.int64, _emit_int_attribute)
def _int_attribute(frame: int, i: int, default: int) -> int:
    """Scalar attribute *i* (checked to be an S64) as int64; *default* when
    absent (*i* -1). Lowered in place: a load and a compare."""
    raise NotImplementedError("only in nopython code")


_I64 = ir.IntType(64)
_ONES = (_I64(1),) * 3


def _emit_config_ok(builder, grid, block, sharedmem):
    """Lowering code: *grid* and *block* (three ``i64`` each) and *sharedmem*
    are within CUDA's limits (an ``i1``)."""
    def within(v, low, high):
        return builder.and_(builder.icmp_signed("<=", _I64(low), v),
                            builder.icmp_signed("<=", v, _I64(high)))
    ok = within(sharedmem, 0, 2**32 - 1)
    for v, high in zip(tuple(grid) + tuple(block), _GRID_MAX + _BLOCK_MAX):
        ok = builder.and_(ok, within(v, 1, high))
    threads = builder.mul(builder.mul(block[0], block[1]), block[2])
    return builder.and_(ok, builder.icmp_signed("<=", threads, _I64(BLOCK_THREADS_MAX)))


@intrinsic
def _config_ok(typingctx, grid, block, sharedmem):
    """``_config_ok(grid, block, sharedmem)``: *grid* and *block* (three
    integers each) and *sharedmem* are within CUDA's limits. Lowered in
    place: a few compares."""
    def codegen(context, builder, sig, args):
        def values(value, ty):
            return [context.cast(builder, v, t, nt.int64)
                    for v, t in zip(cgutils.unpack_tuple(builder, value), ty)]
        return _emit_config_ok(builder, values(args[0], sig.args[0]),
                               values(args[1], sig.args[1]),
                               context.cast(builder, args[2], sig.args[2], nt.int64))
    return nt.boolean(grid, block, sharedmem), codegen


# -- the checks every handler calls, compiled once as C functions ---------------------
# Called by symbol, not linked into each handler: a function a handler links
# is optimised and made machine code again with every handler (Numba links
# its callees' IR), and these checks and messages were most of a handler's
# code. They are written as LLVM IR, all in one module compiled once per
# process by the first handler (a Numba compile of each cost more than the
# rest of a first handler); handlers find them by symbol (docs/jax.md, "How
# the handler is built").

_SHARED = {}  # symbol -> (signature, define(emitter, *params))


def _shared(symbol, sig):
    """Make ``define(emitter, *params)``, emitting its body, the C function
    *symbol* of Numba signature *sig* (voidptr and int64 arguments), called
    from nopython code through the intrinsic this returns."""
    def register(define):
        _SHARED[symbol] = (sig, define)

        def call(typingctx, *args):
            def codegen(context, builder, call_sig, values):
                return builder.call(_declare(context, builder.module, symbol), values)
            return sig, codegen
        # Numba binds a call's arguments by the typer's signature: define's, less the emitter
        params = list(inspect.signature(define).parameters.values())[1:]
        call.__signature__ = inspect.Signature(
            [inspect.Parameter("typingctx", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + params)
        call.__doc__ = define.__doc__
        return intrinsic(call)
    return register


def _declare(context, module, symbol):
    """Shared function *symbol* in *module* (declared there if not yet)."""
    sig, _ = _SHARED[symbol]
    fnty = ir.FunctionType(context.get_value_type(sig.return_type),
                           [context.get_value_type(t) for t in sig.args])
    return cgutils.get_or_insert_function(module, fnty, symbol)


def _checks_module(context, library):
    """The LLVM module defining the shared functions."""
    module = library.create_ir_module("numba_cuda_launch_jax_checks")
    with context.push_code_library(library):
        for symbol, (sig, define) in _SHARED.items():
            fn = _declare(context, module, symbol)
            builder = ir.IRBuilder(fn.append_basic_block("entry"))
            define(xla_ffi._Emitter(context, builder), *fn.args)
    return module


def _cpu_context():
    from numba.core.registry import cpu_target

    return cpu_target.target_context


@functools.lru_cache(maxsize=None)
def shared_functions():
    """``{symbol: address}``: the C functions handlers call by symbol,
    compiled (or their machine code loaded from the handler cache) once per
    process and given to the JIT's symbol table."""
    from numba.core.compiler_lock import global_compiler_lock

    context = _cpu_context()
    codegen = context.codegen()

    def build():
        library = codegen.create_library("numba_cuda_launch_jax_checks")
        library.enable_object_caching()
        library.add_ir_module(_checks_module(context, library))
        library.finalize()
        return library
    with global_compiler_lock:
        library = shared_library(codegen, build)
    _LIBRARY.append(library)  # the code lives as long as its library
    out = {symbol: library.get_pointer_to_function(symbol) for symbol in _SHARED}
    for symbol, address in out.items():
        llvm_binding.add_symbol(symbol, address)
    return out


_LIBRARY = []


@functools.lru_cache(maxsize=None)
def shared_code():
    """``{symbol: CFuncCode}`` of the :func:`shared_functions`, for C
    libraries (:mod:`.aot`): each the whole module's IR."""
    context = _cpu_context()
    codegen = context.codegen()
    llvm_ir = str(_checks_module(context, codegen.create_library("numba_cuda_launch_jax_checks")))
    return {symbol: CFuncCode(llvm_ir, symbol, tuple(sig.args), sig.return_type,
                              *codegen.magic_tuple(), define)
            for symbol, (sig, define) in _SHARED.items()}


_P, _I = nt.voidptr, nt.int64
_NULL = ir.Constant(ir.IntType(8).as_pointer(), None)
_I32 = ir.IntType(32)


def _ne(builder, a, b):
    return builder.icmp_signed("!=", a, b)


@_shared("numba_cuda_launch_jax_check_items", _P(_P, _I, _I, _P))
def _check_items(e, frame, n_args, n_rets, context):
    """NULL when the call has *n_args* arguments and *n_rets* results, each a
    buffer; else the error saying what it has (:func:`xla_ffi.check_call`)."""
    b = e.builder
    got_args, got_rets = (e.i64(frame, xla_ffi._FRAME_ARGS + xla_ffi._SIZE),
                          e.i64(frame, xla_ffi._FRAME_RETS + xla_ffi._SIZE))
    with b.if_then(b.or_(_ne(b, got_args, n_args), _ne(b, got_rets, n_rets))):
        b.ret(xla_ffi._emit_report(e, frame, xla_ffi._COUNTS_TEXT, context, got_args, got_rets,
                                   n_args, n_rets))
    for what, offset, count in (("argument", xla_ffi._FRAME_ARGS, got_args),
                                ("result", xla_ffi._FRAME_RETS, got_rets)):
        kinds = e.ptr(frame, offset + xla_ffi._TYPES)
        with cgutils.for_range(b, count) as loop:
            kind = e.i32(kinds, e.times(4, loop.index))
            with b.if_then(_ne(b, kind, _I32(xla_ffi._BUFFER))):
                b.ret(xla_ffi._emit_report(e, frame, xla_ffi._NOT_BUFFER_TEXT, context,
                                           xla_ffi._text(e, what), loop.index,
                                           b.sext(kind, _I64)))
    b.ret(_NULL)


@_shared("numba_cuda_launch_jax_check_signature", _P(_P, _P, _I, _I, _P, _P, _I, _P, _P, _P))
def _check_signature(e, frame, buffers, n_buffers, n_in, table, names, n, indices, reads,
                     context):
    """NULL when the call matches a handler's signature; else the error for
    the first difference. Its *n_buffers* buffers (the arguments, then the
    results from index *n_in*) must be of the (XLA type code, rank) int64
    pairs at *buffers*. Its attributes are found among the *n* the handler
    reads, described at *table* in name order, five int64 each: offset of
    the name in *names* (NUL-terminated names), its length, the XLA type
    code of its scalar, whether it is required, its position; the index of
    each in the call (-1: absent) is written at its position in *indices*
    (int64). An attribute missing, of another type or not read (*reads*: a
    C string listing those read) is an error."""
    b = e.builder
    with cgutils.for_range(b, n_buffers) as loop:
        i = loop.index
        is_ret = b.icmp_signed(">=", i, n_in)
        j = b.select(is_ret, b.sub(i, n_in), i)
        items = b.select(is_ret, e.ptr(frame, xla_ffi._FRAME_RETS + xla_ffi._ITEMS),
                         e.ptr(frame, xla_ffi._FRAME_ARGS + xla_ffi._ITEMS))
        buf = e.ptr(items, e.times(8, j))
        code = e.i64(buffers, e.times(16, i))
        rank = e.i64(buffers, b.add(e.times(16, i), _I64(8)))
        with b.if_then(b.or_(_ne(b, b.sext(e.i32(buf, xla_ffi._BUF_DTYPE), _I64), code),
                             _ne(b, e.i64(buf, xla_ffi._BUF_RANK), rank))):
            b.ret(xla_ffi._emit_check_buffer(e, frame, b.zext(is_ret, _I64), j, code, rank,
                                             context))

    def index_slot(k):  # where the index of attribute k goes
        return xla_ffi._field(e.context, b, indices, e.times(8, k), nt.int64)
    with cgutils.for_range(b, n) as loop:
        b.store(_I64(-1), index_slot(loop.index))
    # XLA gives the attributes sorted by name: each is found at the first
    # name tried
    cursor = cgutils.alloca_once_value(b, _I64(0))
    known = cgutils.alloca_once(b, ir.IntType(1))
    with cgutils.for_range(b, e.i64(frame, xla_ffi._FRAME_ATTRS + xla_ffi._SIZE)) as outer:
        i = outer.index
        b.store(ir.Constant(ir.IntType(1), 0), known)
        with cgutils.for_range(b, n) as inner:
            pos = b.add(b.load(cursor), inner.index)
            pos = b.select(b.icmp_signed(">=", pos, n), b.sub(pos, n), pos)
            entry = b.gep(table, [e.times(40, pos)])
            with b.if_then(xla_ffi._emit_name_is(e, frame, i, b.gep(names, [e.i64(entry, 0)]),
                                                 e.i64(entry, 8))):
                b.store(i, index_slot(e.i64(entry, 32)))
                b.store(b.add(pos, _I64(1)), cursor)
                b.store(ir.Constant(ir.IntType(1), 1), known)
                inner.do_break()
        with b.if_then(b.not_(b.load(known))):
            b.ret(xla_ffi._emit_unknown_attr_error(e, frame, i, reads, context))
    with cgutils.for_range(b, n) as loop:
        entry = b.gep(table, [e.times(40, loop.index)])
        code = e.i64(entry, 16)
        i = e.i64(indices, e.times(8, e.i64(entry, 32)))
        bad = e.choose(b.icmp_signed("<", i, _I64(0)), lambda: _ne(b, e.i64(entry, 24), _I64(0)),
                       lambda: b.not_(xla_ffi._emit_is_scalar(e, frame, i, code)))
        with b.if_then(bad):
            b.ret(xla_ffi._emit_check_scalar_attr(e, frame, i, b.gep(names, [e.i64(entry, 0)]),
                                                  code, context))
    b.ret(_NULL)


@_shared("numba_cuda_launch_jax_config_error", _P(_P, _I, _I, _I, _I, _I, _I, _I, _P, _P))
def _config_error(e, frame, gx, gy, gz, bx, by, bz, sharedmem, source, context):
    """The error saying which of grid ``(gx, gy, gz)``, block ``(bx, by, bz)``
    and *sharedmem* is outside CUDA's limits and why (*source*: where grid
    and block came from)."""
    b = e.builder
    with b.if_then(b.not_(_emit_config_ok(b, (gx, gy, gz), _ONES, _I64(0)))):
        b.ret(xla_ffi._emit_report(e, frame, _BAD_GRID, context, gx, gy, gz, source))
    with b.if_then(b.not_(_emit_config_ok(b, _ONES, (bx, by, bz), _I64(0)))):
        b.ret(xla_ffi._emit_report(e, frame, _BAD_BLOCK, context, bx, by, bz, source))
    b.ret(xla_ffi._emit_report(e, frame, _BAD_SHAREDMEM, context, sharedmem))


@_shared("numba_cuda_launch_jax_launch_failed", _P(_P, _I, _P))
def _launch_failed(e, frame, status, prefix):
    """The error for a failed launch: *prefix* (a C string, e.g. ``"...
    kernel 'k' failed: "``) with the driver's name of *status* and its code
    (:func:`xla_ffi.launch_error`)."""
    e.builder.ret(xla_ffi._emit_launch_failed(e, frame, status, prefix))


@_shared("numba_cuda_launch_jax_refuse", _P(_P, _P, _I, _I))
def _refuse(e, frame, message, major, minor):
    """The handler of a platform a kernel cannot run on: the metadata query
    answered (API *major*.*minor*, no traits), every call the UNIMPLEMENTED
    error *message*."""
    b = e.builder
    with b.if_then(xla_ffi._emit_is_metadata_query(e, frame)):
        b.ret(xla_ffi._emit_answer(e, frame, _I64(0), major, minor))
    b.ret(xla_ffi._emit_error(e, frame, message, _I64(_UNIMPLEMENTED)))


# -- the handler --------------------------------------------------------------------

@intrinsic
def _attribute_config(typingctx, frame, indices):
    """Grid and block from the call's attributes (y and z default to 1),
    at the first six of *indices*. Lowered in place."""
    ty = nt.UniTuple(nt.int64, 3)

    def codegen(context, builder, sig, args):
        e = xla_ffi._Emitter(context, builder)
        frame_ptr = builder.bitcast(args[0], ir.IntType(8).as_pointer())
        at = cgutils.unpack_tuple(builder, args[1])
        values = [_emit_int_attribute(e, frame_ptr, at[i], _I64(1)) for i in range(6)]
        return context.make_tuple(builder, sig.return_type, (
            context.make_tuple(builder, ty, values[:3]),
            context.make_tuple(builder, ty, values[3:])))
    return nt.Tuple((ty, ty))(frame, indices), codegen


_UNIMPLEMENTED = 12  # XLA_FFI_Error_Code_UNIMPLEMENTED
_ON_CPU = ("numba_cuda_launch: jax_kernel of CUDA kernel '%s' was called on XLA:CPU; its "
           "handlers run on CUDA GPUs only. To run it on the CPU, in numba-cuda's CUDA "
           "simulator, set NUMBA_ENABLE_CUDASIM=1 before numba is imported (docs/jax.md)")
_ON_CPU_UNSIMULATED = (
    "numba_cuda_launch: jax_kernel of %s '%s' was called on XLA:CPU; its handlers "
    "run on CUDA GPUs only, and numba-cuda's CUDA simulator cannot run it (it runs "
    "numba-cuda kernels only): call it on a GPU")
_ON_CUDA = ("numba_cuda_launch: jax_kernel of CUDA kernel '%s' was called on a GPU, but the "
            "kernel is numba-cuda's CUDA simulator's (NUMBA_ENABLE_CUDASIM=1), which runs "
            "on XLA:CPU only: call it on a CPU device (JAX_PLATFORMS=cpu)")


@dataclass(frozen=True)
class Refusal:
    """The handler of the platform a kernel cannot run on (:func:`refusal`):
    its address and a ctypes function pointer to it."""

    address: int
    ctypes: Any
    library: Any  # the code library holding the machine code


def refusal(kernel_name, simulated, source="numba-cuda"):
    """The handler of the platform a kernel cannot run on: it fails every call
    saying why. *source* names the kernel's compiler. A few instructions
    calling the shared refusal with the message, made as LLVM IR (no Numba
    compile, nothing worth caching), once per message and process."""
    from numba.core.compiler_lock import global_compiler_lock

    if simulated:
        message = _ON_CUDA % kernel_name
    elif source == "numba-cuda":
        message = _ON_CPU % kernel_name
    else:
        message = _ON_CPU_UNSIMULATED % (kind(source), kernel_name)
    shared_functions()  # the shared refusal, found by symbol
    with global_compiler_lock:  # one definition of each symbol in the JIT
        made = _REFUSALS.get(message)
        if made is None:
            made = _REFUSALS[message] = _make_refusal(message)
    return made


_REFUSALS = {}  # message -> Refusal


def _make_refusal(message):
    major, minor = xla_ffi.api_version()
    context = _cpu_context()
    symbol = "numba_cuda_launch_jax_refusal_" + hashlib.sha256(
        message.encode()).hexdigest()[:24]
    library = context.codegen().create_library(symbol)
    module = library.create_ir_module(symbol)
    fn = ir.Function(module, ir.FunctionType(_NULL.type, [_NULL.type]), symbol)
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    refuse = _declare(context, module, "numba_cuda_launch_jax_refuse")
    text = xla_ffi._text(xla_ffi._Emitter(context, builder), message)
    builder.ret(builder.call(refuse, [fn.args[0], text, _I64(major), _I64(minor)]))
    library.add_ir_module(module)
    library.finalize()
    address = library.get_pointer_to_function(symbol)
    return Refusal(address, ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address), library)


# The handler's source, made from these templates per launch variant (a
# batch-aware kernel's handler holds the launch twice, once per rank
# variant, the variant a constant of each): one function body for Numba to
# type, with no call to inline (Numba's inliner copied a launch body's IR
# into every handler, a sixth of another signature's compile).
_HANDLER = """\
def handler(frame, desc):
    if xla_ffi.is_metadata_query(frame):
        return xla_ffi.answer_metadata_query(frame, traits, major, minor)
    err = _check_items(frame, n_in, n_out, xla_ffi.c_string(context))
    if xla_ffi.is_error(err):
        return err
{body}"""

# a batch-aware kernel's: the first buffer's rank selects the variant
_BY_RANK = """\
rank = xla_ffi.buffer_rank(first(frame, 0))
if rank == rank1:
{batched}
if rank != rank0:
    return xla_ffi.report(frame, xla_ffi.c_string(
        "%s: %s 0 has rank %lld; the handler takes rank %lld, or %lld with a "
        "leading batch dimension"), xla_ffi.c_string(context),
        xla_ffi.c_string(first_what), rank, rank0, rank1)
{unbatched}"""

# The launch of one variant: the frame checked against it (an error when
# it differs), its buffers and scalars read, the kernel preloaded (XLA's
# initialize stage) or launched, a configuration out of CUDA's limits an
# error; the driver's failure an error naming its status.
_LAUNCH = """\
n_buffers, n_in_, attrs, names, n_attrs, reads, ctx = _signature({variant})
buffers, image = _descriptor(desc, {variant})
slots = _attribute_slots({variant})
err = _check_signature(frame, buffers, n_buffers, n_in_, attrs, names, n_attrs, slots, reads,
                       ctx)
if xla_ffi.is_error(err):
    return err
indices = _attribute_indices(slots, {variant})
inputs, outputs = _buffer_views(frame, {variant}, desc)
scalars = _scalar_values(frame, {variant}, indices)
args = inputs + outputs + scalars
if xla_ffi.execution_stage(frame) != xla_ffi.STAGE_EXECUTE:
    status = _preload(kernel[1, 1], {variant}, image, args)
else:
{config}
    grid, block = _dim3(grid), _dim3(block)
    if not _config_ok(grid, block, shmem):
        return _config_error(frame, grid[0], grid[1], grid[2], block[0], block[1], block[2],
                             shmem, xla_ffi.c_string(source), ctx)
    status = _launch(kernel[grid, block, xla_ffi.stream(frame), shmem]{dependent}, {variant},
                     image, args)
if status != 0:
    return _launch_failed(frame, status, xla_ffi.c_string(failed))
return xla_ffi.ok()"""

# grid and block from the call's attributes, or from the @njit launch rule
_FROM_ATTRIBUTES = """\
    grid, block = _attribute_config(frame, indices)
    shmem = _int_attribute(frame, indices[6], 0)"""
_FROM_RULE = """\
    returned, config = _call_rule(rule, _shapes(inputs) + scalars)
    if not returned:
        return xla_ffi.report(frame, xla_ffi.c_string(
            "%s: the launch rule raised an exception (call it from Python with the input "
            "shapes and scalars to see it)"), ctx)
    grid, block = config
    shmem = _int_attribute(frame, indices[0], 0)"""


def _handler_source(batch_aware, rule, dependent):
    """The handler's Python source for the launch variant."""
    def launch(variant, indent):
        return textwrap.indent(_LAUNCH.format(
            variant=variant, config=_FROM_RULE if rule else _FROM_ATTRIBUTES,
            dependent=".dependent()" if dependent else ""), indent)
    if batch_aware:
        body = _BY_RANK.format(batched=launch("batched", "    "),
                               unbatched=launch("unbatched", ""))
    else:
        body = launch("unbatched", "")
    return _HANDLER.format(body=textwrap.indent(body, "    "))


def described_images(plans):
    """Whether a handler of *plans* (one per rank variant) takes its
    kernels' images from its descriptor: where the backend launches image
    records and every plan has an image (not a live handle, not the
    simulator's kernels)."""
    return backends.BACKEND.launches_image_records and all(
        p.live is None and p.image is not None for p in plans)


def layout_key(variants, plans, n_in):
    """What a handler body is specific to besides its kernel's options: the
    number of inputs *n_in*, the types of *variants* and, of each plan, the
    overload's parameter types (the scalars' conversions and range checks
    are the body's) and layout (sizes, cooperative, dependent), arrays by
    rank and layout alone; every type where images are not described
    (:func:`described_images`)."""
    if not described_images(plans):
        return ("types", n_in, tuple(tuple(v) for v in variants))
    return ("layout", n_in, tuple(untyped_arrays(v) for v in variants),
            tuple(plan_layout(p) for p in plans))


def _variant_arrays(variants):
    """The array types of the unbatched and the batched variant (the same
    for a handler without a batched one)."""
    return [[t for t in argtypes if isinstance(t, nt.Array)]
            for argtypes in (variants[0], variants[-1])]


@dataclass(frozen=True)
class HandlerBody:
    """A handler's body (:func:`make_body`): its ``@cfunc``
    ``voidptr(frame, descriptor)`` and the symbol entries call it by."""

    cfunc: Any
    symbol: str
    images: bool  # whether it takes the kernels' images from descriptors


_BODIES = itertools.count()  # a symbol per body of the process


def make_body(kernel, kernel_name, n_in, variants, scalars, command_buffer, launch_rule,
              dependent=False, images=False, cache=None):
    """Compile the body of the FFI handlers of one layout. *variants* are the
    kernel's argument types per rank variant (a batch-aware kernel's second
    has a leading batch dimension), chosen by the first buffer's rank; the
    body launches the overload of these types, or, with *images*, the one
    in the image record of the descriptor it is given (of the same parameter
    layout, :func:`layout_key`). *scalars* ``[(name, dtype)]``; grid and
    block come from the call's attributes, or the ``@njit`` *launch_rule*.
    The body checks the call frame against the signature before reading it
    (counts, buffer types and ranks, attributes) and the launch
    configuration against CUDA's limits, returning an error that says what
    differs. *dependent*: launch as a programmatic dependent launch.
    *cache*: the body's on-disk cache (:func:`.handler_cache.handler_cache`),
    or None."""
    shared_functions()  # before the body's code is made or loaded
    major, minor = xla_ffi.api_version()
    traits = xla_ffi.COMMAND_BUFFER_COMPATIBLE if command_buffer else 0
    context = "numba_cuda_launch: CUDA kernel '%s'" % kernel_name
    failed = context + " failed: "
    attributes = tuple(("ncl_s_" + name, dtype) for name, dtype in scalars)
    arrays = _variant_arrays(variants)
    unbatched, batched = (VariantType(tuple(a), n_in, attributes, launch_rule is not None,
                                      context, index, images) for index, a in enumerate(arrays))
    batch_aware = len(variants) > 1
    n_out = len(arrays[0]) - n_in
    # the first buffer (XLA's first argument, else its first result) selects the variant
    first = xla_ffi.arg_buffer if n_in else xla_ffi.ret_buffer
    rank0, rank1 = (a[0].ndim for a in arrays)
    first_what = "argument" if n_in else "result"

    # the template's names: these constants and the module's functions
    namespace = dict(globals(), traits=traits, major=major, minor=minor, n_in=n_in,
                     n_out=n_out, context=context, failed=failed, kernel=kernel,
                     unbatched=unbatched, batched=batched, rule=launch_rule, first=first,
                     rank0=rank0, rank1=rank1, first_what=first_what,
                     source="the launch rule" if launch_rule is not None else
                     "the attributes ncl_grid_x/y/z and ncl_block_x/y/z")
    text = _handler_source(batch_aware, launch_rule is not None, dependent)
    # one name per source: Numba's messages quote the line a typing error is at
    filename = "<jax_kernel handler: batch-aware %s, launch rule %s, dependent %s>" % (
        batch_aware, launch_rule is not None, bool(dependent))
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)
    cfunc = cached_cfunc(nt.voidptr(nt.voidptr, nt.voidptr), namespace["handler"], cache)
    symbol = "numba_cuda_launch_jax_body_%d" % next(_BODIES)
    llvm_binding.add_symbol(symbol, cfunc.address)
    return HandlerBody(cfunc, symbol, images)


# -- one signature's handler: the body entered with its descriptor -------------------

@dataclass(frozen=True)
class Handler:
    """The FFI handler of one signature (:func:`bind`): its address, a
    ctypes function pointer to it, its body, and what builds its code for
    a C library (:meth:`code`)."""

    address: int
    ctypes: Any
    body: HandlerBody
    library: Any  # the code library holding the entry and descriptor
    entry: Any    # entry(module, callee symbol): defines the entry in a module

    @property
    def cache_hits(self):
        """The body's hits in the handler cache (Numba's counter)."""
        return self.body.cfunc.cache_hits

    def code(self):
        """The :class:`CFuncCode` of the handler as one module: the body's
        code (and all it links) with the entry and descriptor."""
        from numba_cuda_launch.compat.numba_cfunc import cfunc_code

        body = cfunc_code(self.body.cfunc)
        module = llvm_binding.parse_assembly(body.llvm_ir)
        entry = _cpu_context().codegen().create_library(
            "numba_cuda_launch_jax_entry").create_ir_module("numba_cuda_launch_jax_entry")
        symbol = self.entry(entry, body.symbol)
        module.link_in(llvm_binding.parse_assembly(str(entry)))
        return CFuncCode(str(module), symbol, (nt.voidptr,), nt.voidptr, body.triple, body.cpu,
                         body.features, body.pyfunc)


def bind(body, name, variants, plans):
    """The handler of FFI target *name*, of the signature of *variants* (its
    argument types per rank variant) and *plans* (their launch plans): a few instructions
    calling *body* with the signature's descriptor (its buffer types, item
    sizes and, where the body takes them, kernel images), made as LLVM IR
    (no Numba compile). The entry points of *plans* have their parameter
    sizes recorded for tools reading parameters."""
    from numba.core.compiler_lock import global_compiler_lock

    context = _cpu_context()
    arrays = _variant_arrays(variants)
    itemsizes = [context.get_abi_sizeof(context.get_data_type(t.dtype)) for t in arrays[0]]
    # a handler without a batched variant reads the first of each pair only
    images = [p.image if body.images else None for p in plans] + [None] * (2 - len(plans))
    # named by the target (unique in a process): a library built twice is the same bytes
    symbol = "numba_cuda_launch_jax_entry_" + hashlib.sha256(name.encode()).hexdigest()[:24]

    def entry(module, callee):
        """Define the entry (calling *callee*) and its descriptor in
        *module*; return the entry's symbol."""
        words = [constant_bytes(module, "%s_table%d" % (symbol, i), _buffer_table(a))
                 .bitcast(_NULL.type) for i, a in enumerate(arrays[:len(plans)])]
        words += [_NULL] * (2 - len(plans))
        words += [_NULL if image is None else
                  image_record_module(module, "%s_record%d" % (symbol, i), image).bitcast(
                      _NULL.type) for i, image in enumerate(images)]
        words += [_I64(n) for n in itemsizes]
        desc_type = ir.LiteralStructType([w.type for w in words])
        desc = ir.GlobalVariable(module, desc_type, symbol + "_descriptor")
        desc.initializer, desc.global_constant, desc.align = desc_type(words), True, 8
        fn = ir.Function(module, ir.FunctionType(_NULL.type, [_NULL.type]), symbol)
        target = cgutils.get_or_insert_function(
            module, ir.FunctionType(_NULL.type, [_NULL.type, _NULL.type]), callee)
        builder = ir.IRBuilder(fn.append_basic_block("entry"))
        builder.ret(builder.call(target, [fn.args[0], desc.bitcast(_NULL.type)]))
        return symbol

    for plan in plans:
        if plan.entry_name is not None:
            remember_param_sizes(plan.entry_name, plan.param_sizes)
    with global_compiler_lock:  # one definition of each symbol in the JIT
        library = context.codegen().create_library("numba_cuda_launch_jax_entry")
        module = library.create_ir_module("numba_cuda_launch_jax_entry")
        symbol = entry(module, body.symbol)
        library.add_ir_module(module)
        library.finalize()
        address = library.get_pointer_to_function(symbol)
    return Handler(address, ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(address), body,
                   library, entry)
