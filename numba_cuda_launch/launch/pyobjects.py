"""Python objects that unboxing code calls, looked up once per process.

Numba's ``pyapi.unserialize`` rebuilds a pickled object on every execution
(through a Python-level memo); an unboxer runs at every call from Python.
:func:`python_object` keeps the object in a module-level global of the
compiled code instead, filled on first use: still pickled by reference, so
code loaded from Numba's cache finds it again in a new process.
"""

from llvmlite import ir
from numba.core import cgutils

__all__ = ["python_object"]


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
