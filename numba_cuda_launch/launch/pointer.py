"""Raw device addresses in nopython code.

Device memory usually reaches compiled code as an integer address (from
``__cuda_array_interface__``, ``jax.Array.unsafe_buffer_pointer()``, a C
caller). :func:`as_voidptr` turns one into a ``voidptr`` that
``numba.carray``/``numba.farray`` can view as an array to launch with.
"""

from typing import TYPE_CHECKING

from numba.core import cgutils, types
from numba.extending import intrinsic

from numba_cuda_launch.errors import NopythonUsageError

__all__ = ["as_voidptr", "is_null"]

if TYPE_CHECKING:
    # What nopython code calls (a voidptr is an int to checkers); the
    # intrinsic below takes Numba's typing context first.
    def as_voidptr(address: int) -> int:
        """In nopython code: the integer *address* as a ``voidptr``."""
else:
    @intrinsic
    def as_voidptr(typingctx, address):
        """``as_voidptr(address)``: the integer *address* as a ``voidptr``,
        extended to the pointer's width by its signedness (LLVM's ``inttoptr``
        alone would zero-extend an ``int32`` -1 into 0xFFFFFFFF, where an
        ``int64`` -1 is all ones)."""
        if not isinstance(address, types.Integer):
            raise NopythonUsageError("as_voidptr() takes an integer address, got %s" % address)

        def codegen(context, builder, sig, args):
            val, intp = args[0], context.get_value_type(types.intp)
            if val.type.width < intp.width:
                val = builder.sext(val, intp) if sig.args[0].signed else builder.zext(val, intp)
            return builder.inttoptr(val, context.get_value_type(types.voidptr))

        return types.voidptr(address), codegen


@intrinsic
def is_null(typingctx, ptr):
    """``is_null(ptr)``: True for a NULL pointer (``voidptr`` or ``CPointer``)."""
    if not isinstance(ptr, (types.CPointer, types.RawPointer)) and ptr != types.voidptr:
        raise NopythonUsageError("is_null() takes a pointer, got %s" % ptr)

    def codegen(context, builder, sig, args):
        return cgutils.is_null(builder, args[0])
    return types.boolean(ptr), codegen
