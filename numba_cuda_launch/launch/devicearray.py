"""Device arrays as values of CPU nopython code.

A device array passed into an ``@njit``/``@cfunc`` function (numba-cuda's
``DeviceNDArray``, anything with ``__cuda_array_interface__`` or DLPack: see
:mod:`numba_cuda_launch.interop.arrays`) becomes a :class:`DeviceArray`: its
dtype, ndim, layout and writability are part of the type, its data pointer,
shape and strides are values. On the host it offers what does not touch
device memory -- ``shape``, ``strides``, ``size``, ``ndim``, ``dtype``,
``itemsize``, ``nbytes`` and basic slicing (views) -- and passing it to a
kernel builds exactly the array parameters numba-cuda's Python launch builds.
Reading or writing an element on the host is a typing error: it would
dereference device memory.

``DeviceArray`` is not a Numba ``Array`` (so no host array operation applies
to it), but it has the same data model, so a kernel launch passes it as the
``Array`` the kernel was compiled for, without copying. Its meminfo is NULL:
the producer owns the memory, and the object passed in keeps it alive for
the call.
"""

import operator

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.errors import TypingError
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, infer, \
    infer_getattr, infer_global, signature
from numba.extending import NativeValue, lower_builtin, lower_cast, register_model, unbox

from numba_cuda_launch.errors import CudaError
from numba_cuda_launch.launch.pyobjects import python_object
from numba_cuda_launch.runtime import events as _events

__all__ = ["DeviceArray", "set_describer", "as_array_type"]


class DeviceArray(types.Type):
    """The type of a device array in CPU nopython code."""

    def __init__(self, dtype, ndim, layout, readonly=False):
        self.dtype, self.ndim, self.layout, self.readonly = dtype, ndim, layout, readonly
        super().__init__(name="DeviceArray(%s, %dd, %s%s)"
                         % (dtype, ndim, layout, ", readonly" if readonly else ""))

    @property
    def key(self):
        return self.dtype, self.ndim, self.layout, self.readonly

    @property
    def as_array(self):
        """The Numba array type a kernel receives it as."""
        return types.Array(self.dtype, self.ndim, self.layout, readonly=self.readonly)


def as_array_type(ty):
    """*ty* with every DeviceArray (tuples searched) replaced by its array
    type: what a kernel is compiled for."""
    if isinstance(ty, DeviceArray):
        return ty.as_array
    if isinstance(ty, types.BaseTuple):
        return types.BaseTuple.from_types([as_array_type(t) for t in ty])
    return ty


register_model(DeviceArray)(models.ArrayModel)


@lower_cast(DeviceArray, types.Array)
def _device_to_array(context, builder, fromty, toty, val):
    # Same data model: only the layout may change (C or F to A), which is
    # the same struct for Numba arrays.
    return context.cast(builder, val, fromty.as_array, toty)


# -- attributes and views ------------------------------------------------------------

@infer_getattr
class DeviceArrayAttributes(AttributeTemplate):
    key = DeviceArray
    metadata = {"target": "cpu"}

    def resolve_shape(self, ary):
        return types.UniTuple(types.intp, ary.ndim)

    def resolve_strides(self, ary):
        return types.UniTuple(types.intp, ary.ndim)

    def resolve_size(self, ary):
        return types.intp

    def resolve_itemsize(self, ary):
        return types.intp

    def resolve_nbytes(self, ary):
        return types.intp

    def resolve_ndim(self, ary):
        return types.IntegerLiteral(ary.ndim)

    def resolve_dtype(self, ary):
        return types.DType(ary.dtype)


def _struct(context, builder, ty, val):
    return cgutils.create_struct_proxy(ty.as_array)(context, builder, value=val)


def _getattr_impl(name, fn):
    from numba.core.imputils import lower_getattr

    @lower_getattr(DeviceArray, name)
    def impl(context, builder, ty, val):
        return fn(context, builder, ty, _struct(context, builder, ty, val))
    return impl


_getattr_impl("shape", lambda c, b, t, a: a.shape)
_getattr_impl("strides", lambda c, b, t, a: a.strides)
_getattr_impl("size", lambda c, b, t, a: a.nitems)
_getattr_impl("itemsize", lambda c, b, t, a: a.itemsize)
_getattr_impl("nbytes", lambda c, b, t, a: b.mul(a.nitems, a.itemsize))
_getattr_impl("ndim", lambda c, b, t, a: ir.Constant(c.get_value_type(types.intp), t.ndim))
_getattr_impl("dtype", lambda c, b, t, a: c.get_dummy_value())


_ON_DEVICE = ("%s: reading or writing elements of a device array on the host would "
              "dereference device memory; pass the array to a kernel, or copy it to the "
              "host first (outside the compiled function). Only shape, strides, size, "
              "ndim, dtype, itemsize, nbytes and slicing (views) work on the host")


def _view_signature(context, args):
    """The signature of ``ary[index]`` for a basic slice of a device array;
    TypingError for element access (None when *args* are not ours)."""
    if len(args) != 2 or not isinstance(args[0], DeviceArray):
        return None
    ary, index = args
    items = list(index) if isinstance(index, types.BaseTuple) else [index]
    if not all(isinstance(i, (types.SliceType, types.Integer, types.EllipsisType,
                              types.NoneType)) for i in items):
        raise TypingError(_ON_DEVICE % ("indexing %s with %s" % (ary, index)))
    res = context.resolve_function_type(operator.getitem, (ary.as_array, index), {})
    if res is None or not isinstance(res.return_type, types.Array):
        raise TypingError(_ON_DEVICE % ("%s[%s]" % (ary, index)))
    out = res.return_type
    return signature(DeviceArray(out.dtype, out.ndim, out.layout, ary.readonly),
                     ary, res.args[1])


@infer_global(operator.getitem)
class DeviceArrayGetItem(AbstractTemplate):
    """Basic slicing of a device array gives a device array view."""

    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        try:
            return _view_signature(self.context, args)
        except TypingError:
            return None


@infer
class DeviceArrayIndexErrors(AbstractTemplate):
    """Refuses element access and assignment with the reason, as the first
    thing the user reads (builtin templates' errors are not aggregated; see
    launchconfig.KernelConfigureErrors)."""

    key = operator.getitem
    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        return _view_signature(self.context, args)


class _DeviceArraySetItem(AbstractTemplate):
    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        if args and isinstance(args[0], DeviceArray):
            raise TypingError(_ON_DEVICE % ("assigning to %s" % args[0]))
        return None


@infer
class DeviceArraySetItem(_DeviceArraySetItem):
    key = operator.setitem


@infer
class DeviceArrayStaticSetItem(_DeviceArraySetItem):
    key = "static_setitem"


@lower_builtin(operator.getitem, DeviceArray, types.Any)
def _lower_view(context, builder, sig, args):
    ary_ty, index_ty = sig.args
    res_ty = sig.return_type.as_array
    array_sig = signature(res_ty, ary_ty.as_array, index_ty)
    impl = context.get_function(operator.getitem, array_sig)
    return impl(builder, args)


# -- from Python objects --------------------------------------------------------------

_describer = None


def set_describer(fn):
    """Install ``fn(obj, ndim) -> (data, itemsize, shape..., strides...,
    stream)``, the function unboxing calls to read a device array object
    (see :mod:`numba_cuda_launch.interop.arrays`); *stream* is the
    producer's stream to synchronise before use, 0 for none."""
    global _describer
    _describer = fn


def _sync_failed(status, stream):
    """Raise the error of a failed producer-stream synchronisation (called
    from unboxing code, which reports the exception)."""
    raise CudaError(status, "cuStreamSynchronize of a producer's stream (CUDA Array "
                    "Interface v3 'stream' %#x)" % stream)


def _synced_stream_slot(builder):
    """The wrapper-local slot remembering the last producer stream
    synchronised while unboxing this call's arguments: several arrays from
    one stream (CuPy reports its current stream for every array) wait on it
    once. Initialised in the entry block, which precedes every unboxing.
    Only in the Python-call wrapper (named in the ``cpython`` namespace),
    which unboxes each
    argument once before the call: elsewhere (an ``objmode`` block in a
    loop) work may be queued between two unboxings, so each one waits;
    None there."""
    fn = builder.function
    if not fn.name.startswith(("_ZN7cpython", "cpython.")):
        return None
    slot = getattr(fn, "_ncl_synced_stream", None)
    if slot is None:
        with builder.goto_entry_block():
            slot = builder.alloca(ir.IntType(64), name="ncl.synced_stream")
            builder.store(ir.Constant(ir.IntType(64), 0), slot)
        fn._ncl_synced_stream = slot
    return slot


def _emit_producer_sync(c, stream):
    """Synchronise producer *stream* (an ``i64``, 0 for none) unless this
    call's unboxing did already; returns an ``i1`` true on failure (with
    the Python exception set)."""
    builder = c.builder
    slot = _synced_stream_slot(builder)
    failed = cgutils.alloca_once_value(builder, cgutils.false_bit)
    needed = builder.icmp_unsigned("!=", stream, stream.type(0))
    if slot is not None:
        needed = builder.and_(needed, builder.icmp_unsigned("!=", stream, builder.load(slot)))
    with builder.if_then(needed, likely=False):
        status = _events.emit_stream_synchronize(
            builder, builder.inttoptr(stream, ir.IntType(8).as_pointer()))
        ok = builder.icmp_signed("==", status, status.type(0))
        with builder.if_else(ok, likely=True) as (then, otherwise):
            with then:
                if slot is not None:
                    builder.store(stream, slot)
            with otherwise:
                raiser = c.pyapi.unserialize(c.pyapi.serialize_object(_sync_failed))
                args = [c.pyapi.long_from_longlong(builder.sext(status, ir.IntType(64))),
                        c.pyapi.long_from_longlong(stream)]
                res = c.pyapi.call_function_objargs(raiser, args)
                c.pyapi.decref(raiser)
                for a in args:
                    c.pyapi.decref(a)
                c.pyapi.decref(res)  # Py_DecRef: NULL-safe
                builder.store(cgutils.true_bit, failed)
    return builder.load(failed)


#: The attribute where a reader may keep an object's unboxed fields:
#: ``(stream, fields)``, valid while the object's ``stream`` attribute is
#: still that very object (numba-cuda arrays, whose memory, shape and strides
#: never change; only arrays with no producer stream are cached).
CACHED_FIELDS = "_numba_cuda_launch_fields"
_cached_classes = ()


def set_cached_classes(classes):
    """The classes whose objects may carry :data:`CACHED_FIELDS`."""
    global _cached_classes
    _cached_classes = tuple(classes)


def _classes_with_cached_fields():
    return _cached_classes


def _cached_fields(c, obj, fields):
    """The fields tuple cached on *obj* (a new reference), or NULL: only for
    objects of the cached classes, checked in compiled code, so the common
    call from Python reads two attributes instead of calling a reader."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    classes = python_object(c, _cached_classes_ref, "numba_cuda_launch.cached_classes")
    with builder.if_then(cgutils.is_not_null(builder, classes), likely=True):
        cls = pyapi.get_type(obj)
        found = cgutils.alloca_once_value(builder, cgutils.false_bit)
        getitem = pyapi._get_function(
            ir.FunctionType(pyapi.pyobj, [pyapi.pyobj, pyapi.py_ssize_t]), name="PyTuple_GetItem")
        with cgutils.for_range(builder, pyapi.tuple_size(classes)) as loop:
            item = builder.call(getitem, [classes, loop.index])
            with builder.if_then(builder.icmp_unsigned("==", item, cls)):
                builder.store(cgutils.true_bit, found)
        with builder.if_then(builder.load(found), likely=True):
            cached = pyapi.object_getattr_string(obj, CACHED_FIELDS)
            with builder.if_else(cgutils.is_null(builder, cached), likely=False) as (missing, have):
                with missing:
                    pyapi.err_clear()
                with have:
                    stream = pyapi.object_getattr_string(obj, "stream")
                    with builder.if_else(cgutils.is_null(builder, stream)) as (nostream, hasstream):
                        with nostream:
                            pyapi.err_clear()
                        with hasstream:
                            same = builder.icmp_unsigned(
                                "==", pyapi.tuple_getitem(cached, 0), stream)
                            with builder.if_then(same, likely=True):
                                tup = pyapi.tuple_getitem(cached, 1)
                                pyapi.incref(tup)
                                builder.store(tup, result)
                            pyapi.decref(stream)
                    pyapi.decref(cached)
    return builder.load(result)


class _CachedClassesRef:
    """Pickles by reference to :func:`_classes_with_cached_fields`, so
    compiled code (and code loaded from the cache) finds this process's
    classes."""

    def __reduce__(self):
        return (_classes_with_cached_fields, ())


_cached_classes_ref = _CachedClassesRef()


@unbox(DeviceArray)
def _unbox_device_array(typ, obj, c):
    n = typ.ndim
    fields = types.UniTuple(types.intp, 3 + 2 * n)
    failed = cgutils.alloca_once_value(c.builder, cgutils.true_bit)
    out = cgutils.create_struct_proxy(typ.as_array)(c.context, c.builder)
    tup = cgutils.alloca_once_value(c.builder, _cached_fields(c, obj, fields))
    with c.builder.if_then(cgutils.is_null(c.builder, c.builder.load(tup)), likely=False):
        describe = python_object(c, _describer, "numba_cuda_launch.describe_device_array")
        with c.builder.if_then(cgutils.is_not_null(c.builder, describe), likely=True):
            ndim = c.pyapi.long_from_longlong(c.context.get_constant(types.longlong, n))
            c.builder.store(c.pyapi.call_function_objargs(describe, [obj, ndim]), tup)
            c.pyapi.decref(ndim)
    tup = c.builder.load(tup)
    with c.builder.if_then(cgutils.is_not_null(c.builder, tup), likely=True):
        native = c.unbox(fields, tup)
        c.pyapi.decref(tup)
        with c.builder.if_then(c.builder.not_(native.is_error), likely=True):
            _fill(c, out, n, [c.builder.extract_value(native.value, i)
                              for i in range(len(fields))])
            c.builder.store(_emit_producer_sync(c, c.builder.extract_value(
                native.value, len(fields) - 1)), failed)
    return NativeValue(out._getvalue(), is_error=c.builder.load(failed))


def _fill(c, out, n, vals):
    """Fill array struct *out* from ``(data, itemsize, shape..., strides...)``;
    no meminfo (the producer owns the memory) and no parent."""
    shape, strides = vals[2:2 + n], vals[2 + n:2 + 2 * n]
    nitems = c.context.get_constant(types.intp, 1)
    for s in shape:
        nitems = c.builder.mul(nitems, s)
    intp = c.context.get_value_type(types.intp)
    out.meminfo = ir.Constant(out.meminfo.type, None)
    out.parent = ir.Constant(out.parent.type, None)
    out.nitems = nitems
    out.itemsize = vals[1]
    out.data = c.builder.inttoptr(vals[0], out.data.type)
    out.shape = cgutils.pack_array(c.builder, shape, intp)
    out.strides = cgutils.pack_array(c.builder, strides, intp)
