"""Unboxing: a device array object from Python becomes a ``DeviceArray``
value. Its fields are read one of three ways, cheapest first: those its
typing read for this call (:data:`TYPED_FIELDS`), those a numba-cuda array
keeps on itself (:data:`CACHED_FIELDS`), else :func:`read_fields`, in
Python; whichever way, they are checked against the type. See "Reading an
array at each call" in ``docs/devicearrays.md``.
"""

import itertools
import re
import threading
import weakref

import numpy as np
from llvmlite import ir
from numba.core import cgutils, types
from numba.extending import NativeValue, box, unbox

from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray, make_device_array
from numba_cuda_launch.launch.devicearray.producer_wait import forget_waits
from numba_cuda_launch.launch.devicearray.readers import cai_layout, cai_pointer, cai_stream, \
    describe, device_array_type, on_stream, read_cai, read_dlpack, sync_enabled
from numba_cuda_launch.launch.pyobjects import python_object

__all__ = ["CACHED_FIELDS", "TYPED_FIELDS", "READERS", "read_fields"]

_i64 = ir.IntType(64)

#: The attribute where a reader may keep an object's fields: ``(stream,
#: (data, itemsize, shape..., strides..., 0))``, or ``(stream, None)``.
CACHED_FIELDS = "_numba_cuda_launch_fields"

#: class -> ``fn(obj, ndim)``: the fields of its objects, or None (read
#: them through the interface).
READERS = {}


class TypedFields:
    """Fields read while typing a call's arguments, waiting for that call's
    unboxing: :attr:`entries` maps an object's address to ``(weakref.ref(obj),
    thread ident, fields[, serial])``; compiled code skips an entry of another
    thread or of a dead object. Fields with an owner (a consumed DLPack
    tensor) are taken out by the unboxing that uses them; a call failing
    before that leaves them until the object is typed again, :meth:`release`
    is given it, or newer ones push them out (at most ``2 * _OWNED`` stay)."""

    __slots__ = ("entries", "owned")
    _LIMIT = 256  # entries of objects since gone are dropped beyond it
    _OWNED = 32  # entries with owners left by failed calls: the newest kept
    _serials = itertools.count()

    def __init__(self):
        self.entries = {}
        self.owned = []  # (key, serial number) of the entries with owners, oldest first

    def keep_owned(self, obj, fields):
        """Keep *fields*, whose last item owns their memory, for *obj*'s
        unboxing; False when *obj* cannot be referred to weakly (nothing
        kept)."""
        try:
            ref = weakref.ref(obj)
        except TypeError:
            return False
        entries, owned, key = self.entries, self.owned, id(obj)
        if len(entries) > self._LIMIT:  # (inline: this runs at every call)
            entries.clear()
        if len(owned) >= 2 * self._OWNED:
            for k, serial in owned[:-self._OWNED]:
                entry = entries.get(k)
                if entry is not None and entry[-1] == serial:
                    del entries[k]
            del owned[:-self._OWNED]
        serial = next(self._serials)
        entries[key] = (ref, threading.get_ident(), fields, serial)
        owned.append((key, serial))
        return True

    def forget(self, obj):
        self.entries.pop(id(obj), None)

    def release(self, objs):
        """Forget the fields of *objs* (the arguments of a call that failed
        before unboxing them)."""
        pop = self.entries.pop
        for obj in objs:
            pop(id(obj), None)


TYPED_FIELDS = TypedFields()


def _stream_to_wait(stream):
    """The producer stream an array carries (launches on other streams wait
    for it): 0 for none, or when the setting is off."""
    return cai_stream(stream) if stream is not None and sync_enabled() else 0


def _changed(obj, ty, what):
    return TypeError("a %s device array's interface changed between typing and reading it "
                     "(typed %s): %s; it is not launched" % (type(obj).__name__, ty, what))


def _check_type(obj, ty, found):
    """Refuse what is now of type *found*, read under *ty*, when its dtype
    differs or its memory became read-only (its layout is checked by
    compiled code)."""
    if found is ty:
        return
    if found.dtype != ty.dtype:
        raise _changed(obj, ty, "its dtype is now %s" % found.dtype)
    if found.readonly and not ty.readonly:
        raise _changed(obj, ty, "its memory is now read-only")


def _fields_from_cai(obj, cai, ty):
    """:func:`read_fields` from a CUDA Array Interface dict (read by
    :func:`.readers.cai_layout`: its layout checked once, its pointer each
    time)."""
    layout = cai_layout(cai)
    pointer = cai_pointer(cai, layout)
    if len(layout.shape) != ty.ndim:
        raise TypeError("%r is no longer a %d-dimensional device array" % (obj, ty.ndim))
    _check_type(obj, ty, layout.type())
    stream = cai.get("stream")
    return (pointer,) + layout.sizes + (0 if stream is None else _stream_to_wait(stream),)


def _dlpack_fields(obj, ty, layout, data, owner):
    """:func:`read_fields` from what :func:`.readers.read_dlpack` gives."""
    if len(layout.shape) != ty.ndim:
        raise TypeError("%r is no longer a %d-dimensional device array" % (obj, ty.ndim))
    _check_type(obj, ty, layout.type())
    return (data,) + layout.sizes + (0, owner)


def read_fields(obj, ty):
    """The fields of *obj*, typed *ty*, for unboxing: ``(data, itemsize,
    shape..., strides..., producer stream[, owner])`` (stream 0: none; owner:
    a consumed DLPack tensor, held until the call returns), read by
    :data:`READERS`, else the CUDA Array Interface, else DLPack, else
    described; TypeError when that is not what *ty* says."""
    reader = READERS.get(type(obj))
    if reader is not None:
        fields = reader(obj, ty.ndim)
        if fields is not None:
            return fields
    if type(obj) is not np.ndarray and BACKEND.device_memory:
        cai = read_cai(obj.obj if isinstance(obj, on_stream) else obj)
        if cai is not None:
            return _fields_from_cai(obj, cai, ty)
        else:
            found = read_dlpack(obj)
            if found is not None:
                return _dlpack_fields(obj, ty, *found)
    desc = describe(obj)
    if desc is None or len(desc.shape) != ty.ndim:
        raise TypeError("%r is no longer a %d-dimensional device array" % (obj, ty.ndim))
    _check_type(obj, ty, device_array_type(desc))
    fields = (desc.data, desc.dtype.itemsize) + desc.shape + desc.strides + \
        (_stream_to_wait(desc.stream),)
    return fields if desc.owner is None else fields + (desc.owner,)


class _Ref:
    """Pickles as a call of *getter*: compiled code, and code loaded from
    Numba's cache in another process, finds this process's registry."""

    def __init__(self, getter):
        self.getter = getter

    def __reduce__(self):
        return (self.getter, ())


def _get_cached_classes():
    """The classes whose objects may carry :data:`CACHED_FIELDS` (cached
    code refers to this function by name)."""
    return BACKEND.fast_array_classes()


_cached_classes_ref = _Ref(_get_cached_classes)


def _get_typed_fields():
    return TYPED_FIELDS.entries


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


def _typed_fields(c, obj, count):
    """Way 0: the fields read while *obj* was typed for this call (a new
    reference), or NULL. Fields with an owner (*count* + 1 items) are taken
    out of the registry: the call's cleanup releases them."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    stash = python_object(c, _typed_fields_ref, "numba_cuda_launch.typed_fields")
    # Only a positional argument (the wrapper's ``args`` tuple) was typed by
    # the dispatcher just before; an item of a tuple or list argument was not.
    call_argument = _in_tuple(c, builder.function.args[1], obj)
    usable = builder.and_(cgutils.is_not_null(builder, stash), call_argument)
    with builder.if_then(usable, likely=True):
        from_ptr = _c_function(pyapi, "PyLong_FromVoidPtr", pyapi.pyobj, [pyapi.voidptr])
        key = builder.call(from_ptr, [builder.bitcast(obj, pyapi.voidptr)])
        with builder.if_then(cgutils.is_not_null(builder, key), likely=True):
            get = _c_function(pyapi, "PyDict_GetItem", pyapi.pyobj, [pyapi.pyobj, pyapi.pyobj])
            entry = builder.call(get, [stash, key])  # borrowed; sets no exception
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
                        size = _c_function(pyapi, "PyTuple_Size", pyapi.py_ssize_t, [pyapi.pyobj])
                        owned = builder.icmp_signed("==", builder.call(size, [fields]),
                                                    ir.Constant(pyapi.py_ssize_t, count + 1))
                        with builder.if_then(owned, likely=False):
                            delete = _c_function(pyapi, "PyDict_DelItem", ir.IntType(32),
                                                 [pyapi.pyobj, pyapi.pyobj])
                            builder.call(delete, [stash, key])  # frees *entry*
                    pyapi.decref(target)  # Py_DecRef: NULL-safe
                pyapi.err_clear()  # a failed call or conversion: read another way
            pyapi.decref(key)
    return builder.load(result)


def _read_fields(c, obj, typ):
    """Way 2: :func:`read_fields`' tuple (a new reference), or NULL with the
    Python exception set."""
    builder, pyapi = c.builder, c.pyapi
    result = cgutils.alloca_once_value(builder, pyapi.get_null_object())
    read = python_object(c, read_fields, "numba_cuda_launch.read_device_array_fields")
    expected = python_object(c, typ, "numba_cuda_launch.device_array_type.%s"
                             % re.sub(r"\W", "_", str(typ)))
    with builder.if_then(builder.and_(cgutils.is_not_null(builder, read),
                                      cgutils.is_not_null(builder, expected)), likely=True):
        builder.store(pyapi.call_function_objargs(read, [obj, expected]), result)
    return builder.load(result)


@unbox(DeviceArray)
def _unbox_device_array(typ, obj, c):
    builder, pyapi = c.builder, c.pyapi
    n = typ.ndim
    count = 3 + 2 * n
    tuple_type = types.UniTuple(types.intp, count)
    fields = cgutils.alloca_once(builder, ir.ArrayType(_i64, count), zfill=True)
    read = cgutils.alloca_once_value(builder, cgutils.false_bit)
    owner = cgutils.alloca_once_value(builder, pyapi.get_null_object())  # held until cleanup
    tuple_size = _c_function(pyapi, "PyTuple_Size", pyapi.py_ssize_t, [pyapi.pyobj])
    get_slice = _c_function(pyapi, "PyTuple_GetSlice", pyapi.pyobj,
                            [pyapi.pyobj, pyapi.py_ssize_t, pyapi.py_ssize_t])

    def from_tuple(tup, last=False):
        # Store a fields tuple (a new reference, or NULL) in *fields*; one
        # item more is its owner (a DLPack tensor), held until the call
        # returns. A tuple that does not fit leaves the error set only from
        # the last way (the next way must start with none).
        slot = cgutils.alloca_once_value(builder, tup)
        size = ir.Constant(pyapi.py_ssize_t, count)
        with builder.if_then(cgutils.is_not_null(builder, tup), likely=True):
            with builder.if_then(builder.icmp_signed("==", builder.call(tuple_size, [tup]),
                                                     builder.add(size, size.type(1))),
                                 likely=False):
                builder.store(tup, owner)
                builder.store(builder.call(get_slice, [tup, size.type(0), size]), slot)
        tup = builder.load(slot)
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

    # In the wrapper Numba builds for calls from Python (its ``cpython``
    # namespace) the arguments were typed just before.
    in_call = builder.function.name.startswith(("_ZN7cpython", "cpython."))
    if in_call:  # way 1 first: its class test is cheaper than way 0's lookup
        from_tuple(_cached_fields(c, obj))
        with builder.if_then(builder.not_(builder.load(read))):
            from_tuple(_typed_fields(c, obj, count))
    else:
        # Python ran since the function's launches last waited (an objmode
        # block): work may have been queued on any producer stream.
        forget_waits(builder)
        from_tuple(_cached_fields(c, obj))
    with builder.if_then(builder.not_(builder.load(read)), likely=False):
        from_tuple(_read_fields(c, obj, typ), last=True)
    if not in_call:  # objmode cleans up right after unboxing: the tensor would be freed
        with builder.if_then(cgutils.is_not_null(builder, builder.load(owner)), likely=False):
            pyapi.err_set_string(
                "PyExc_TypeError",
                "a DLPack producer cannot leave an objmode block as %s: its tensor would be "
                "released before any launch used it; pass it to the function as an argument"
                % (typ,))
            builder.store(cgutils.false_bit, read)
    vals = [builder.load(cgutils.gep_inbounds(builder, fields, 0, i)) for i in range(count)]
    _check_layout(c, typ, vals, read)
    with builder.if_then(builder.not_(builder.load(read)), likely=False):
        pyapi.decref(builder.load(owner))  # no cleanup follows a failed unboxing
        builder.store(pyapi.get_null_object(), owner)
    out = cgutils.create_struct_proxy(typ.as_array)(c.context, builder)
    with builder.if_then(builder.load(read), likely=True):
        _fill(c, out, n, vals)
    value = make_device_array(c.context, builder, typ, out._getvalue(), vals[-1])
    return NativeValue(value, is_error=builder.not_(builder.load(read)),
                       cleanup=lambda: pyapi.decref(builder.load(owner)))


def _check_layout(c, typ, vals, read):
    """The fields of an object were read after it was typed (its interface
    read again): an item size or strides that are not what the type says
    (its dtype's size, C or F contiguity) mean the object changed in
    between; refused (TypeError), never launched."""
    builder, n = c.builder, typ.ndim
    itemsize = c.context.get_abi_sizeof(c.context.get_data_type(typ.dtype))
    good = builder.icmp_unsigned("==", vals[1], ir.Constant(_i64, itemsize))
    shape, strides = vals[2:2 + n], vals[2 + n:2 + 2 * n]
    if typ.layout in "CF" and n:
        dims = list(zip(shape, strides))
        if typ.layout == "C":
            dims.reverse()
        contiguous, empty, expect = cgutils.true_bit, cgutils.false_bit, vals[1]
        for extent, stride in dims:
            contiguous = builder.and_(contiguous, builder.or_(
                builder.icmp_signed("==", extent, _i64(1)),
                builder.icmp_signed("==", stride, expect)))
            empty = builder.or_(empty, builder.icmp_signed("==", extent, _i64(0)))
            expect = builder.mul(expect, extent)
        good = builder.and_(good, builder.or_(contiguous, empty))
    with builder.if_then(builder.and_(builder.load(read), builder.not_(good)), likely=False):
        c.pyapi.err_set_string(
            "PyExc_TypeError",
            "a device array's interface changed between typing and reading it: its item size "
            "or strides are no longer those of %s; it is not launched" % (typ,))
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
    # was changed -- which arraytype.py refuses when typing, as Numba's
    # reflection would store the NULL into the caller's list.
    c.pyapi.err_set_string(
        "PyExc_TypeError",
        "%s cannot be returned to Python or given to Python code (objmode, print): in "
        "compiled code a device array is a view of memory its producer's object owns. "
        "Return what you need of it (shape, strides, size), or take the view in Python"
        % (typ,))
    return c.pyapi.get_null_object()
