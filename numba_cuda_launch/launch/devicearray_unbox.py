"""Unboxing: a device array object from Python becomes a ``DeviceArray``.

At every call from Python each device-array argument is read: its data
pointer, shape, strides, and the producer stream to wait for (CUDA Array
Interface v3). Two ways:

1. *cached fields*: objects of the classes given to
   :func:`set_cached_classes` (numba-cuda's arrays, whose memory, shape and
   strides never change) may carry :data:`CACHED_FIELDS`, ``(stream,
   fields)``, valid while their ``stream`` attribute is that very object
   (fields None: read each time): compiled code reads two attributes;
2. the *describer* (:func:`set_describer`, a Python function of the interop
   layer, with fast readers for CuPy and PyTorch) for everything else, and
   whenever 1 cannot answer. Reading CuPy's attributes from compiled code
   instead was measured slower than its Python reader: ``PyObject_GetAttr``
   has none of the interpreter's attribute caches.

The producer stream is then synchronised, once per stream and call
(:func:`_emit_producer_sync`).
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import NativeValue, unbox

from numba_cuda_launch.errors import CudaError
from numba_cuda_launch.launch.devicearray import DeviceArray
from numba_cuda_launch.launch.pyobjects import python_object
from numba_cuda_launch.runtime import events as _events

__all__ = ["CACHED_FIELDS", "set_describer", "set_cached_classes"]

_i64 = ir.IntType(64)
_SYNCED = 4  # producer streams one call remembers having synchronised

#: The attribute where a reader may keep an object's fields: ``(stream,
#: (data, itemsize, shape..., strides..., 0))``, or ``(stream, None)``.
CACHED_FIELDS = "_numba_cuda_launch_fields"

_describer = None
_cached_classes = ()


def set_describer(fn):
    """Install ``fn(obj, ndim) -> (data, itemsize, shape..., strides...,
    stream)``, the function unboxing calls to read a device array object
    (see :mod:`numba_cuda_launch.interop.arrays`); *stream* is the
    producer's stream to synchronise before use, 0 for none."""
    global _describer
    _describer = fn


def set_cached_classes(classes):
    """The classes whose objects may carry :data:`CACHED_FIELDS`."""
    global _cached_classes
    _cached_classes = tuple(classes)


class _Ref:
    """Pickles as a call of *getter*: compiled code, and code loaded from
    Numba's cache in another process, finds this process's registry."""

    def __init__(self, getter):
        self.getter = getter

    def __reduce__(self):
        return (self.getter, ())


def _get_cached_classes():
    return _cached_classes


_cached_classes_ref = _Ref(_get_cached_classes)


# -- slots of the Python-call wrapper -------------------------------------------------

def _wrapper_slot(builder, name, initial):
    """An ``i64`` slot of the Python-call wrapper being built (the function
    named in Numba's ``cpython`` namespace), set to *initial* in its entry
    block, which precedes every argument's unboxing; None elsewhere (an
    ``objmode`` block in a loop unboxes repeatedly, with work queued in
    between). One slot per *name* and wrapper: what one call's unboxing
    learnt, shared by its arguments."""
    fn = builder.function
    if not fn.name.startswith(("_ZN7cpython", "cpython.")):
        return None
    slots = fn.__dict__.setdefault("_ncl_slots", {})
    if name not in slots:
        with builder.goto_entry_block():
            slots[name] = builder.alloca(_i64, name=name)
            builder.store(ir.Constant(_i64, initial), slots[name])
    return slots[name]


# -- the producer stream -------------------------------------------------------------

def _sync_failed(status, stream):
    """Raise the error of a failed producer-stream synchronisation (called
    from unboxing code, which reports the exception)."""
    raise CudaError(status, "cuStreamSynchronize of a producer's stream (CUDA Array "
                    "Interface v3 'stream' %#x)" % stream)


def _emit_producer_sync(c, stream):
    """Synchronise producer *stream* (an ``i64``, 0 for none) unless this
    call's unboxing did already (several arrays of one producer name one
    stream: CuPy its current stream for each; a call remembers the last
    four streams it waited for); returns an ``i1``, true on failure (with
    the Python exception set)."""
    builder = c.builder
    slots = [_wrapper_slot(builder, "ncl.synced_stream.%d" % i, 0) for i in range(_SYNCED)]
    slots = [s for s in slots if s is not None]
    failed = cgutils.alloca_once_value(builder, cgutils.false_bit)
    needed = builder.icmp_unsigned("!=", stream, stream.type(0))
    for slot in slots:
        needed = builder.and_(needed, builder.icmp_unsigned("!=", stream, builder.load(slot)))
    with builder.if_then(needed, likely=False):
        status = _events.emit_stream_synchronize(
            builder, builder.inttoptr(stream, ir.IntType(8).as_pointer()))
        ok = builder.icmp_signed("==", status, status.type(0))
        with builder.if_else(ok, likely=True) as (then, otherwise):
            with then:
                if slots:  # remember it in the next slot, round robin
                    next_slot = _wrapper_slot(builder, "ncl.synced_stream.next", 0)
                    index = builder.load(next_slot)
                    for i, slot in enumerate(slots):
                        with builder.if_then(builder.icmp_signed("==", index, index.type(i))):
                            builder.store(stream, slot)
                    builder.store(builder.urem(builder.add(index, index.type(1)),
                                               index.type(_SYNCED)), next_slot)
            with otherwise:
                raiser = c.pyapi.unserialize(c.pyapi.serialize_object(_sync_failed))
                args = [c.pyapi.long_from_longlong(builder.sext(status, _i64)),
                        c.pyapi.long_from_longlong(stream)]
                res = c.pyapi.call_function_objargs(raiser, args)
                c.pyapi.decref(raiser)
                for a in args:
                    c.pyapi.decref(a)
                c.pyapi.decref(res)  # Py_DecRef: NULL-safe
                builder.store(cgutils.true_bit, failed)
    return builder.load(failed)


# -- reading ---------------------------------------------------------------------------

def _c_function(pyapi, name, restype, argtypes):
    return pyapi._get_function(ir.FunctionType(restype, argtypes), name=name)


def _class_index(c, registry, getitem, cls_of, cls):
    """The index in Python sequence *registry* (borrowed items, read with
    *getitem*) of the entry whose class (``cls_of(item)``) is *cls*, or -1."""
    builder, pyapi = c.builder, c.pyapi
    found = cgutils.alloca_once_value(builder, ir.Constant(pyapi.py_ssize_t, -1))
    size = _c_function(pyapi, "PyObject_Size", pyapi.py_ssize_t, [pyapi.pyobj])
    with cgutils.for_range(builder, builder.call(size, [registry])) as loop:
        item = builder.call(getitem, [registry, loop.index])
        with builder.if_then(builder.icmp_unsigned("==", cls_of(item), cls)):
            builder.store(loop.index, found)
    return builder.load(found)


def _cached_fields(c, obj):
    """Way 1: the fields tuple cached on *obj* (a new reference), or NULL."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    classes = python_object(c, _cached_classes_ref, "numba_cuda_launch.cached_classes")
    with builder.if_then(cgutils.is_not_null(builder, classes), likely=True):
        getitem = _c_function(pyapi, "PyTuple_GetItem", pyapi.pyobj,
                              [pyapi.pyobj, pyapi.py_ssize_t])
        index = _class_index(c, classes, getitem, lambda item: item, pyapi.get_type(obj))
        with builder.if_then(builder.icmp_signed(">=", index, index.type(0)), likely=True):
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
                            tup = pyapi.tuple_getitem(cached, 1)
                            same = builder.and_(
                                builder.icmp_unsigned("==", pyapi.tuple_getitem(cached, 0), stream),
                                builder.icmp_unsigned("!=", tup, pyapi.borrow_none()))
                            with builder.if_then(same, likely=True):
                                pyapi.incref(tup)
                                builder.store(tup, result)
                            pyapi.decref(stream)
                    pyapi.decref(cached)
    return builder.load(result)


def _describe(c, obj, n):
    """Way 3: the describer's fields tuple (a new reference), or NULL with
    the Python exception set."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    describe = python_object(c, _describer, "numba_cuda_launch.describe_device_array")
    with builder.if_then(cgutils.is_not_null(builder, describe), likely=True):
        ndim = pyapi.long_from_longlong(c.context.get_constant(types.longlong, n))
        builder.store(pyapi.call_function_objargs(describe, [obj, ndim]), result)
        pyapi.decref(ndim)
    return builder.load(result)


@unbox(DeviceArray)
def _unbox_device_array(typ, obj, c):
    builder, pyapi = c.builder, c.pyapi
    n = typ.ndim
    count = 3 + 2 * n
    tuple_type = types.UniTuple(types.intp, count)
    fields = cgutils.alloca_once(builder, ir.ArrayType(_i64, count))
    read = cgutils.alloca_once_value(builder, cgutils.false_bit)

    def from_tuple(tup):
        # Store a fields tuple (a new reference, or NULL) in *fields*.
        with builder.if_then(cgutils.is_not_null(builder, tup), likely=True):
            native = c.unbox(tuple_type, tup)
            pyapi.decref(tup)
            with builder.if_then(builder.not_(native.is_error), likely=True):
                for i in range(count):
                    builder.store(builder.extract_value(native.value, i),
                                  cgutils.gep_inbounds(builder, fields, 0, i))
                builder.store(cgutils.true_bit, read)

    from_tuple(_cached_fields(c, obj))
    with builder.if_then(builder.not_(builder.load(read)), likely=False):
        from_tuple(_describe(c, obj, n))
    failed = cgutils.alloca_once_value(builder, cgutils.true_bit)
    out = cgutils.create_struct_proxy(typ.as_array)(c.context, builder)
    with builder.if_then(builder.load(read), likely=True):
        vals = [builder.load(cgutils.gep_inbounds(builder, fields, 0, i)) for i in range(count)]
        _fill(c, out, n, vals)
        builder.store(_emit_producer_sync(c, vals[-1]), failed)
    return NativeValue(out._getvalue(), is_error=builder.load(failed))


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
