"""The ``DeviceArray`` type: a device array in CPU nopython code. Its dtype,
ndim, layout and writability are in the type; its value is the ``Array``
struct a kernel launch passes on (meminfo NULL: the producer owns the
memory) and the producer stream. On the host only what does not touch
device memory types (attributes, ``len``, views). See ``docs/devicearrays.md``.
"""

import operator
import re

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import models
from numba.core.typing.templates import AbstractTemplate, AttributeTemplate, infer, \
    infer_getattr, infer_global, signature
from numba.core.imputils import lower_getattr
from numba.extending import lower_builtin, lower_cast, register_model

from numba_cuda_launch.errors import NopythonUsageError
from numba_cuda_launch.kernels.foreign import PointerParam
from numba_cuda_launch.launch.refusals import explain_lines, register_typer

__all__ = ["DeviceArray", "as_array_type", "make_device_array", "device_array_parts"]


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


@register_model(DeviceArray)
class DeviceArrayModel(models.StructModel):
    """The ``Array`` struct a kernel receives, and the producer stream
    (``intp``, 0 for none) a launch on another stream waits for."""

    def __init__(self, dmm, fe_type):
        members = [("array", fe_type.as_array), ("producer_stream", types.intp)]
        super().__init__(dmm, fe_type, members)


def make_device_array(context, builder, ty, array, producer_stream):
    """A *ty* value from an ``Array`` struct value and a producer stream."""
    out = cgutils.create_struct_proxy(ty)(context, builder)
    out.array = array
    out.producer_stream = producer_stream
    return out._getvalue()


def device_array_parts(context, builder, ty, val):
    """``(array, producer_stream)`` of a *ty* value."""
    proxy = cgutils.create_struct_proxy(ty)(context, builder, value=val)
    return proxy.array, proxy.producer_stream


@lower_cast(DeviceArray, types.Array)
def _device_to_array(context, builder, fromty, toty, val):
    # The array struct; only the layout may change (C or F to A), which is
    # the same struct for Numba arrays.
    array, _ = device_array_parts(context, builder, fromty, val)
    return context.cast(builder, array, fromty.as_array, toty)


# -- attributes and views ------------------------------------------------------------

def _struct(context, builder, ty, val):
    array, _ = device_array_parts(context, builder, ty, val)
    return cgutils.create_struct_proxy(ty.as_array)(context, builder, value=array)


# name -> (its type for a DeviceArray, its value from the Array struct)
_ATTRIBUTES = {
    "shape": (lambda t: types.UniTuple(types.intp, t.ndim), lambda c, b, t, a: a.shape),
    "strides": (lambda t: types.UniTuple(types.intp, t.ndim), lambda c, b, t, a: a.strides),
    "size": (lambda t: types.intp, lambda c, b, t, a: a.nitems),
    "itemsize": (lambda t: types.intp, lambda c, b, t, a: a.itemsize),
    "nbytes": (lambda t: types.intp, lambda c, b, t, a: b.mul(a.nitems, a.itemsize)),
    "ndim": (lambda t: types.IntegerLiteral(t.ndim),
             lambda c, b, t, a: ir.Constant(c.get_value_type(types.intp), t.ndim)),
    "dtype": (lambda t: types.DType(t.dtype), lambda c, b, t, a: c.get_dummy_value()),
}


def _attribute(name, resolve, value):
    @lower_getattr(DeviceArray, name)
    def impl(context, builder, ty, val):
        return value(context, builder, ty, _struct(context, builder, ty, val))
    return "resolve_" + name, lambda self, ary: resolve(ary)


DeviceArrayAttributes = infer_getattr(type(
    "DeviceArrayAttributes", (AttributeTemplate,),
    dict({"key": DeviceArray, "metadata": {"target": "cpu"}},
         **dict(_attribute(name, *fns) for name, fns in _ATTRIBUTES.items()))))


@explain_lines
def _unknown_attribute(line):
    """Any other attribute (``.T``, ``.copy_to_host``, ``.sum``): the reason
    leads Numba's "Unknown attribute" (a template raising instead would
    break ``hasattr`` and hide the user's own ``overload_method``)."""
    m = _UNKNOWN_ATTRIBUTE.match(line)
    return _HOST_ONLY % (m.group(2), m.group(1)) if m else None


_UNKNOWN_ATTRIBUTE = re.compile(r"Unknown attribute '([^']+)' of type (DeviceArray\(.*\))$")
_ON_HOST = ("shape, strides, size, ndim, dtype, itemsize, nbytes, len() and slicing (views) "
            "work on the host")
_HOST_ONLY = ("%%s has no attribute %%r in compiled code: only %s; pass the array to a "
              "kernel for anything else" % _ON_HOST)
_ON_DEVICE = ("%%s: reading or writing elements of a device array on the host would "
              "dereference device memory; pass the array to a kernel, or copy it to the "
              "host first (outside the compiled function). Only %s" % _ON_HOST)


def _view_signature(context, args, kws):
    """The signature of ``ary[index]`` for a basic slice of a device array
    (a view); NopythonUsageError for element access (None when *args* are
    not ours)."""
    if len(args) != 2 or not isinstance(args[0], DeviceArray):
        return None
    ary, index = args
    items = list(index) if isinstance(index, types.BaseTuple) else [index]
    if not all(isinstance(i, (types.SliceType, types.Integer, types.EllipsisType,
                              types.NoneType)) for i in items):
        raise NopythonUsageError(_ON_DEVICE % ("indexing %s with %s" % (ary, index)))
    res = context.resolve_function_type(operator.getitem, (ary.as_array, index), {})
    if res is None or not isinstance(res.return_type, types.Array):
        raise NopythonUsageError(_ON_DEVICE % ("%s[%s]" % (ary, index)))
    out = res.return_type
    return signature(DeviceArray(out.dtype, out.ndim, out.layout, ary.readonly),
                     ary, res.args[1])


register_typer(operator.getitem, _view_signature, NopythonUsageError, DeviceArray)


def _cpu_template(name, key, generic):
    """A typing template class for *key* in CPU code, typing with *generic*."""
    return type(name, (AbstractTemplate,), {"key": key, "metadata": {"target": "cpu"},
                                            "generic": generic})


def _refuse_setitem(self, args, kws):
    if args and isinstance(args[0], DeviceArray):
        raise NopythonUsageError(_ON_DEVICE % ("assigning to %s" % args[0]))
    return None


infer(_cpu_template("DeviceArraySetItem", operator.setitem, _refuse_setitem))
infer(_cpu_template("DeviceArrayStaticSetItem", "static_setitem", _refuse_setitem))


@lower_builtin(operator.getitem, DeviceArray, types.Any)
def _lower_view(context, builder, sig, args):
    ary_ty, index_ty = sig.args
    res_ty = sig.return_type.as_array
    array_sig = signature(res_ty, ary_ty.as_array, index_ty)
    impl = context.get_function(operator.getitem, array_sig)
    array, stream = device_array_parts(context, builder, ary_ty, args[0])
    view = impl(builder, [array, args[1]])
    return make_device_array(context, builder, sig.return_type, view, stream)  # same producer


# -- len(), and what would compute on the elements ------------------------------------

@infer_global(len)
class DeviceArrayLen(AbstractTemplate):
    """``len(ary)``: the first extent, as for a NumPy array (host-side)."""

    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        if len(args) != 1 or kws or not isinstance(args[0], DeviceArray):
            return None
        if args[0].ndim == 0:
            raise NopythonUsageError("len() of a 0-d device array (%s)" % args[0])
        return signature(types.intp, args[0])


@lower_builtin(len, DeviceArray)
def _lower_len(context, builder, sig, args):
    shape = _struct(context, builder, sig.args[0], args[0]).shape
    return builder.extract_value(shape, 0)


# Operators and iteration would read the elements on the host. No template
# refuses them (one would run for every operator of all CPU code): Numba's
# "No implementation" error is led by the reason instead.
_ELEMENT_OPERATORS = frozenset((
    "add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul", "neg", "pos",
    "invert", "eq", "ne", "lt", "le", "gt", "ge", "and_", "or_", "xor", "lshift",
    "rshift", "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior",
    "ixor", "contains"))
_OPERATOR_CALL = re.compile(r">>> (\w+)\((.*DeviceArray\(.*)\)$")
_GETITER = re.compile(r"Invalid use of getiter with parameters \((DeviceArray\(.*\))\)$")
# Numba's literal types as the types a call is typed with
_LITERAL = re.compile(r"Literal\[(\w+)\]\([^()]*\)")
_UNLITERAL = {"int": "int64", "float": "float64", "bool": "bool", "complex": "complex128",
              "str": "unicode_type"}


@explain_lines
def _element_access(line):
    """An operator on, or iteration over, a device array's elements."""
    m = _OPERATOR_CALL.match(line)
    if m and m.group(1) in _ELEMENT_OPERATORS:
        args = _LITERAL.sub(lambda lit: _UNLITERAL.get(lit.group(1), lit.group(0)), m.group(2))
        return _ON_DEVICE % ("%s on %s" % (m.group(1), args))
    m = _GETITER.match(line)
    return _ON_DEVICE % ("iterating over %s" % m.group(1)) if m else None


# -- lists of device arrays passed in ---------------------------------------------------

# Numba writes a changed list argument back into the caller's list, boxing
# each item; a device array cannot become a Python object again (see
# .unbox), and the write-back stores what boxing returns without
# checking it. Changing such a list is refused when typing.
_LIST_MUTATORS = ("append", "extend", "insert", "pop", "remove", "clear", "reverse", "sort")


def _reflected_device_list(ty):
    return isinstance(ty, types.List) and ty.reflected and isinstance(ty.dtype, DeviceArray)


def _refuse_list_change(ty, what):
    raise NopythonUsageError(
        "%s of a list of device arrays passed in (%s): Numba would write the changed list "
        "back into the caller's, and device arrays cannot become Python objects again; "
        "build a new list (or a tuple) in the function instead" % (what, ty))


def _list_mutator(name):
    def resolve(self, ty):
        if _reflected_device_list(ty):
            _refuse_list_change(ty, "." + name + "()")
        return None
    return resolve


ReflectedDeviceArrayListAttributes = type(
    "ReflectedDeviceArrayListAttributes", (AttributeTemplate,),
    dict({"key": types.List, "metadata": {"target": "cpu"}},
         **{"resolve_" + name: _list_mutator(name) for name in _LIST_MUTATORS}))
infer_getattr(ReflectedDeviceArrayListAttributes)


def _list_item_change(key):
    def generic(self, args, kws):
        if args and _reflected_device_list(args[0]):
            _refuse_list_change(args[0], "changing items")
        return None

    infer(_cpu_template("ReflectedDeviceArrayList_%s" % getattr(key, "__name__", key), key,
                        generic))


for _key in (operator.setitem, operator.delitem, "static_setitem"):
    _list_item_change(_key)


@lower_cast(DeviceArray, PointerParam)
def _device_array_address(context, builder, fromty, toty, val):
    """A device array given for a foreign kernel's pointer parameter: its data."""
    array_ty = as_array_type(fromty)
    array = context.make_array(array_ty)(context, builder,
                                         context.cast(builder, val, fromty, array_ty))
    return builder.bitcast(array.data, ir.IntType(8).as_pointer())
