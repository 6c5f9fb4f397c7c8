"""Python objects that boxing and unboxing code calls, looked up once per
process, and the boxing of handle values (objects of a few integer fields).

Numba's ``pyapi.unserialize`` rebuilds a pickled object on every execution
(through a Python-level memo); an unboxer runs at every call from Python.
:func:`python_object` keeps the object in a module-level global of the
compiled code instead, filled on first use: still pickled by reference, so
code loaded from Numba's cache finds it again in a new process.
"""

from llvmlite import ir
from numba.core import cgutils

__all__ = ["python_object", "box_integers", "unbox_integers"]

_i64 = ir.IntType(64)


def python_object(c, obj, name):
    """A borrowed reference to *obj* (a module-level function), from the
    global *name* of the module being built, unserialized the first time
    (NULL with the Python exception set if that failed). The reference is
    kept for the life of the process."""
    builder, pyapi = c.builder, c.pyapi
    module = builder.module
    gv = module.globals.get(name)
    if gv is None:
        gv = ir.GlobalVariable(module, pyapi.pyobj, name)
        gv.linkage = "internal"
        gv.initializer = ir.Constant(pyapi.pyobj, None)
    cached = builder.load(gv)
    with builder.if_then(cgutils.is_null(builder, cached), likely=False):
        builder.store(pyapi.unserialize(pyapi.serialize_object(obj)), gv)
    return builder.load(gv)


def box_integers(c, cls, values):
    """``cls(*values)``, *values* ``i64`` (unsigned) LLVM values: a
    handle's Python object (a new reference, NULL if the call raised)."""
    pyapi = c.pyapi
    make = pyapi.unserialize(pyapi.serialize_object(cls))
    ints = [pyapi.long_from_ulonglong(v) for v in values]
    obj = pyapi.call_function_objargs(make, ints)
    for i in ints:
        pyapi.decref(i)
    pyapi.decref(make)
    return obj


def unbox_integers(c, obj, names):
    """The attributes *names* of Python object *obj* as ``i64`` values (0
    for one that is missing; the Python error is left set for the caller's
    ``c.pyapi.c_api_error()``)."""
    out = []
    for name in names:
        attr = c.pyapi.object_getattr_string(obj, name)
        slot = cgutils.alloca_once_value(c.builder, ir.Constant(_i64, 0))
        with c.builder.if_then(cgutils.is_not_null(c.builder, attr), likely=True):
            c.builder.store(c.pyapi.long_as_ulonglong(attr), slot)
            c.pyapi.decref(attr)
        out.append(c.builder.load(slot))
    return out
