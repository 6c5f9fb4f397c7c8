"""The conditional handle (``CUgraphConditionalHandle``) as a value of CPU
code and of kernels: a Python object, a Numba type of one 64-bit field, so
that a kernel taking one has one 8-byte parameter (numba-cuda's ABI), and
its conversions to the 64-bit integer parameters of other compilers'
kernels. The graph side is :mod:`.conditional`, the kernel side
:mod:`.intrinsics` (docs/graphs.md, "Conditional nodes").
"""

import numbers

from numba.core import cgutils, types
from numba.core.imputils import lower_cast
from numba.core.typeconv import Conversion
from numba.extending import (NativeValue, box, intrinsic, make_attribute_wrapper, models,
                             overload, register_model, typeof_impl, unbox)

from numba_cuda_launch.launch.pyobjects import box_integers, unbox_integers

__all__ = ["ConditionalHandle", "ConditionalHandleType", "conditional_handle_type",
           "handle_value", "make_handle", "HANDLE_OUTSIDE_GRAPH"]

#: Why a launch given a conditional handle on a stream recording no graph is
#: refused (the kernel would set a handle outside its graph's launch, which
#: faults the context: CUDA_ERROR_ILLEGAL_ADDRESS on driver 580).
HANDLE_OUTSIDE_GRAPH = ("%s is a ConditionalHandle, and the launch's stream records no "
                        "graph: a kernel may set a conditional handle only in a launch of "
                        "its graph (record this launch between graphs.begin_capture and "
                        "end_capture, or begin_body and end_body)")


class ConditionalHandle:
    """A conditional node's condition (``CUgraphConditionalHandle``), from
    :func:`numba_cuda_launch.graphs.conditional_handle`: passed to kernels,
    which set it with :func:`numba_cuda_launch.graphs.set_conditional`.
    ``handle`` is the driver's 64-bit value; ``ConditionalHandle(h)`` makes
    one of it, in Python and in nopython code (a C caller's handle)."""

    __slots__ = ("handle",)
    handle: int

    def __init__(self, handle: int) -> None:
        if not isinstance(handle, numbers.Integral) or isinstance(handle, bool) or \
                not 0 <= handle < 1 << 64:
            raise TypeError("ConditionalHandle(): handle must be an integer between 0 and "
                            "2**64-1, not %r (%s)" % (handle, type(handle).__name__))
        self.handle = int(handle)

    def __repr__(self) -> str:
        return "<ConditionalHandle %s>" % hex(self.handle)

    def __eq__(self, other: object) -> bool:
        return type(other) is ConditionalHandle and other.handle == self.handle

    def __hash__(self) -> int:
        return hash(("ConditionalHandle", self.handle))


class ConditionalHandleType(types.Type):
    """The Numba type of :class:`ConditionalHandle`, in CPU code and in
    kernels. A launch converts it to a kernel's 64-bit integer parameter
    (a foreign kernel's ``cudaGraphConditionalHandle``), nothing else."""

    #: the integer a compiler without this type (numba-cuda-mlir) compiles
    #: a kernel taking one for: the handle's one 64-bit field, same bytes
    kernel_integer = types.uint64

    def __init__(self) -> None:
        super().__init__(name="ConditionalHandle")

    def can_convert_to(self, typingctx, other):
        if isinstance(other, types.Integer) and other.bitwidth == 64:
            return Conversion.unsafe
        return None


#: The Numba type of conditional handles (for kernel signatures:
#: ``cuda.jit(void(graphs.conditional_handle_type, ...))``).
conditional_handle_type = ConditionalHandleType()


@register_model(ConditionalHandleType)
class _ConditionalHandleModel(models.StructModel):
    # One uint64 member: one 8-byte kernel parameter once flattened.
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("handle", types.uint64)])


make_attribute_wrapper(ConditionalHandleType, "handle", "handle")


@typeof_impl.register(ConditionalHandle)
def _typeof_handle(val, c):
    return conditional_handle_type


def handle_value(context, builder, value):
    """The ``i64`` of conditional handle *value* (in any target whose data
    model is this module's)."""
    return cgutils.create_struct_proxy(conditional_handle_type)(
        context, builder, value=value).handle


def make_handle(context, builder, raw):
    """A conditional handle value of ``i64`` *raw*."""
    value = cgutils.create_struct_proxy(conditional_handle_type)(context, builder)
    value.handle = raw
    return value._getvalue()


@intrinsic
def _from_integer(typingctx, value):
    def codegen(context, builder, sig, args):
        raw = context.cast(builder, args[0], sig.args[0], types.uint64)
        return make_handle(context, builder, raw)
    return conditional_handle_type(value), codegen


@overload(ConditionalHandle, target="cpu")
def _ol_handle(handle):
    if isinstance(handle, types.Integer):
        return lambda handle: _from_integer(handle)
    return None


@lower_cast(ConditionalHandleType, types.Integer)
def _handle_to_integer(context, builder, fromty, toty, val):
    return handle_value(context, builder, val)


@box(ConditionalHandleType)
def _box_handle(typ, val, c):
    return box_integers(c, ConditionalHandle, [handle_value(c.context, c.builder, val)])


@unbox(ConditionalHandleType)
def _unbox_handle(typ, obj, c):
    (handle,) = unbox_integers(c, obj, ["handle"])
    return NativeValue(make_handle(c.context, c.builder, handle),
                       is_error=c.pyapi.c_api_error())
