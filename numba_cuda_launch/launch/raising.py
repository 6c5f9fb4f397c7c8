"""Raising this package's exceptions from compiled code: one factory.

Failed launches, occupancy queries, graph, event and synchronisation calls
raise in an ``@njit`` function of its own (:func:`raiser`): numba 0.68
mishandles a dynamic exception raised in a ``@cfunc``'s body or a
``compile_internal`` subroutine, but handles one propagated from a called
dispatcher. The text is constant per *reason* (a branch each).
"""

import functools

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import intrinsic

from numba_cuda_launch.launch.backends import call_jitted

__all__ = ["raiser", "emit_raise_if_failed"]


@functools.lru_cache(maxsize=None)
def raiser(exc_class, default, cases=()):
    """An ``@njit`` ``raise_error(status, reason)`` raising
    ``exc_class(status, *args)``: *args* is the tuple paired with *reason*
    in *cases* (pairs ``(reason, args)``), else *default*. Each tuple holds
    constants; *status* is the run-time ``CUresult``."""

    @intrinsic
    def _raise(typingctx, status, reason):
        def codegen(context, builder, sig, args):
            status_val = context.cast(builder, args[0], sig.args[0], types.int64)
            reason_val = context.cast(builder, args[1], sig.args[1], types.int64)
            branches = [(builder.icmp_signed("==", reason_val, ir.Constant(reason_val.type, r)),
                         extra) for r, extra in cases]
            for taken, extra in branches + [(cgutils.true_bit, default)]:
                with builder.if_then(taken, likely=False):
                    context.call_conv.return_dynamic_user_exc(
                        builder, exc_class, (status_val,) + tuple(extra),
                        (types.int64,) + (None,) * len(extra))
            return context.get_dummy_value()
        return types.none(status, reason), codegen

    def raise_error(status, reason):
        _raise(status, reason)
    return njit(raise_error)


def emit_raise_if_failed(context, builder, raise_error, status, reason):
    """Emit: if *status* (an ``i32`` ``CUresult``) is not 0, call
    *raise_error* (a :func:`raiser`) with it and *reason* (``i32``)."""
    failed = builder.icmp_signed("!=", status, ir.Constant(status.type, 0))
    with cgutils.if_unlikely(builder, failed):
        call_jitted(context, builder, raise_error, (types.int32, types.int32), [status, reason])
