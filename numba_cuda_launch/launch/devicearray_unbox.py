"""Unboxing: a device array object from Python becomes a ``DeviceArray``.

At every call from Python each device-array argument is read: its data
pointer, shape, strides, and the producer stream to wait for (CUDA Array
Interface v3). Three ways:

0. *typed fields*: the interop layer's typing of CuPy and PyTorch arrays
   reads their fields too, into :data:`TYPED_FIELDS`; the call's wrapper,
   which runs right after the dispatcher typed its arguments, takes them
   from there (one Python call per argument instead of two), for its
   positional arguments only. Items of tuple or list arguments and
   unboxing elsewhere (``objmode``) never do: those objects were not typed
   just before by the dispatcher;
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

The producer stream travels with the value; a launch on another stream
waits for it (:mod:`.producer_wait`).
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import NativeValue, box, unbox

from numba_cuda_launch.launch.devicearray import DeviceArray, make_device_array
from numba_cuda_launch.launch.producer_wait import forget_waits
from numba_cuda_launch.launch.pyobjects import python_object

__all__ = ["CACHED_FIELDS", "TYPED_FIELDS", "set_describer", "set_cached_classes"]

_i64 = ir.IntType(64)

#: The attribute where a reader may keep an object's fields: ``(stream,
#: (data, itemsize, shape..., strides..., 0))``, or ``(stream, None)``.
CACHED_FIELDS = "_numba_cuda_launch_fields"

#: Fields read while typing an argument, by ``id`` of the object:
#: ``(weakref.ref(obj), threading.get_ident(), fields)``, *fields* as the
#: describer returns them. An entry is overwritten each time its object is
#: typed; an entry of another thread or of a dead object is not used.
TYPED_FIELDS = {}

_describer = None
_cached_classes = ()


def set_describer(fn):
    """Install ``fn(obj, ndim) -> (data, itemsize, shape..., strides...,
    stream)``, the function unboxing calls to read a device array object
    (see :mod:`numba_cuda_launch.interop.arrays`); *stream* is the
    producer's stream, which launches on other streams wait for, 0 for
    none."""
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


def _get_typed_fields():
    return TYPED_FIELDS


_typed_fields_ref = _Ref(_get_typed_fields)


# -- reading ---------------------------------------------------------------------------

def _c_function(pyapi, name, restype, argtypes):
    return pyapi._get_function(ir.FunctionType(restype, argtypes), name=name)


def _in_tuple(c, tup, wanted):
    """An ``i1``: *wanted* (a ``PyObject*``) is an item of tuple *tup*
    (compared by identity)."""
    builder, pyapi = c.builder, c.pyapi
    found = cgutils.alloca_once_value(builder, cgutils.false_bit)
    size = _c_function(pyapi, "PyTuple_Size", pyapi.py_ssize_t, [pyapi.pyobj])
    getitem = _c_function(pyapi, "PyTuple_GetItem", pyapi.pyobj, [pyapi.pyobj, pyapi.py_ssize_t])
    with cgutils.for_range(builder, builder.call(size, [tup])) as loop:
        item = builder.call(getitem, [tup, loop.index])
        with builder.if_then(builder.icmp_unsigned("==", item, wanted)):
            builder.store(cgutils.true_bit, found)
    return builder.load(found)


def _cached_fields(c, obj):
    """Way 1: the fields tuple cached on *obj* (a new reference), or NULL."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    classes = python_object(c, _cached_classes_ref, "numba_cuda_launch.cached_classes")
    with builder.if_then(cgutils.is_not_null(builder, classes), likely=True):
        with builder.if_then(_in_tuple(c, classes, pyapi.get_type(obj)), likely=True):
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


def _in_call_wrapper(builder):
    """True in the wrapper Numba builds for calls from Python (its
    ``cpython`` namespace), whose arguments were typed just before."""
    return builder.function.name.startswith(("_ZN7cpython", "cpython."))


def _is_call_argument(c, obj):
    """An ``i1``: *obj* is one of the positional arguments of the call the
    wrapper is making (its ``args`` tuple), which the dispatcher has just
    typed -- not an item of a tuple or list argument (typed by Numba's
    ``typeof``, or not at all)."""
    return _in_tuple(c, c.builder.function.args[1], obj)


def _typed_fields(c, obj):
    """Way 0: the fields read while *obj* was typed for this call (a new
    reference), or NULL."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    stash = python_object(c, _typed_fields_ref, "numba_cuda_launch.typed_fields")
    usable = builder.and_(cgutils.is_not_null(builder, stash), _is_call_argument(c, obj))
    with builder.if_then(usable, likely=True):
        from_ptr = _c_function(pyapi, "PyLong_FromVoidPtr", pyapi.pyobj, [pyapi.voidptr])
        key = builder.call(from_ptr, [builder.bitcast(obj, pyapi.voidptr)])
        with builder.if_then(cgutils.is_not_null(builder, key), likely=True):
            get = _c_function(pyapi, "PyDict_GetItem", pyapi.pyobj, [pyapi.pyobj, pyapi.pyobj])
            entry = builder.call(get, [stash, key])  # borrowed; sets no exception
            pyapi.decref(key)
            with builder.if_then(cgutils.is_not_null(builder, entry), likely=True):
                ident = _c_function(pyapi, "PyThread_get_thread_ident", pyapi.ulong, [])
                as_ulong = _c_function(pyapi, "PyLong_AsUnsignedLong", pyapi.ulong, [pyapi.pyobj])
                stored = builder.call(as_ulong, [pyapi.tuple_getitem(entry, 1)])
                mine = builder.icmp_unsigned("==", builder.call(ident, []), stored)
                with builder.if_then(mine, likely=True):
                    target = pyapi.call_function_objargs(pyapi.tuple_getitem(entry, 0), [])
                    with builder.if_then(builder.icmp_unsigned("==", target, obj), likely=True):
                        fields = pyapi.tuple_getitem(entry, 2)
                        pyapi.incref(fields)
                        builder.store(fields, result)
                    pyapi.decref(target)  # Py_DecRef: NULL-safe
                pyapi.err_clear()  # a failed call or conversion: read another way
    return builder.load(result)


def _describe(c, obj, n):
    """Way 2: the describer's fields tuple (a new reference), or NULL with
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
    fields = cgutils.alloca_once(builder, ir.ArrayType(_i64, count), zfill=True)
    read = cgutils.alloca_once_value(builder, cgutils.false_bit)

    def from_tuple(tup, last=False):
        # Store a fields tuple (a new reference, or NULL) in *fields*. A
        # tuple that does not fit leaves the error set only from the last
        # way (the next way must start with none).
        with builder.if_then(cgutils.is_not_null(builder, tup), likely=True):
            native = c.unbox(tuple_type, tup)
            pyapi.decref(tup)
            with builder.if_else(native.is_error, likely=False) as (bad, good):
                with bad:
                    if not last:
                        pyapi.err_clear()
                with good:
                    for i in range(count):
                        builder.store(builder.extract_value(native.value, i),
                                      cgutils.gep_inbounds(builder, fields, 0, i))
                    builder.store(cgutils.true_bit, read)

    if _in_call_wrapper(builder):
        from_tuple(_typed_fields(c, obj))
        with builder.if_then(builder.not_(builder.load(read)), likely=False):
            from_tuple(_cached_fields(c, obj))
    else:
        # Python ran since the function's launches last waited (an objmode
        # block): work may have been queued on any producer stream.
        forget_waits(builder)
        from_tuple(_cached_fields(c, obj))
    with builder.if_then(builder.not_(builder.load(read)), likely=False):
        from_tuple(_describe(c, obj, n), last=True)
    _check_itemsize(c, typ, fields, read)
    out = cgutils.create_struct_proxy(typ.as_array)(c.context, builder)
    vals = [builder.load(cgutils.gep_inbounds(builder, fields, 0, i)) for i in range(count)]
    with builder.if_then(builder.load(read), likely=True):
        _fill(c, out, n, vals)
    value = make_device_array(c.context, builder, typ, out._getvalue(), vals[-1])
    return NativeValue(value, is_error=builder.not_(builder.load(read)))


def _check_itemsize(c, typ, fields, read):
    """The fields were read after the object was typed (its interface read
    again): an item size that is not the type's means the object changed
    in between; refused (TypeError), never launched with data of another
    dtype."""
    builder = c.builder
    itemsize = c.context.get_abi_sizeof(c.context.get_data_type(typ.dtype))
    got = builder.load(cgutils.gep_inbounds(builder, fields, 0, 1))
    changed = builder.and_(builder.load(read),
                           builder.icmp_unsigned("!=", got, ir.Constant(_i64, itemsize)))
    with builder.if_then(changed, likely=False):
        c.pyapi.err_set_string(
            "PyExc_TypeError",
            "a device array's interface changed between typing and reading it: its item "
            "size is no longer %d bytes (%s)" % (itemsize, typ))
        builder.store(cgutils.false_bit, read)


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


@box(DeviceArray)
def _box_device_array(typ, val, c):
    # Compiled code holds no reference to the producer's object, which owns
    # the memory: a Python object made here could outlive it. Refused when
    # it happens, not when compiling: a list of device arrays passed in
    # compiles boxing code for its reflection, which runs only if the list
    # was changed -- which devicearray.py refuses when typing, as Numba's
    # reflection would store the NULL into the caller's list.
    c.pyapi.err_set_string(
        "PyExc_TypeError",
        "%s cannot be returned to Python or given to Python code (objmode, print): in "
        "compiled code a device array is a view of memory its producer's object owns. "
        "Return what you need of it (shape, strides, size), or take the view in Python"
        % (typ,))
    return c.pyapi.get_null_object()
