"""The CUDA context a launching thread uses.

A ``CUkernel`` launches in whatever context is current on the calling
thread: the primary context numba-cuda and JAX use, or any other. A thread
with no current context (a fresh thread of a C caller's) gets device 0's
primary context, as with the CUDA runtime API.
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_NOT_INITIALIZED
from numba_cuda_launch.cudadrv import driver

__all__ = ["emit_ensure_context", "emit_with_context", "emit_in_context"]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)


@driver.cold_function("numba_cuda_launch_ensure_context", ())
def _ensure_context(fn, builder):
    ctx = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
    driver.return_if_failed(builder, driver.call(builder, "cuCtxGetCurrent", [ctx]))
    with builder.if_then(cgutils.is_not_null(builder, builder.load(ctx)), likely=True):
        builder.ret(ir.Constant(_i32, 0))
    dev = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    driver.return_if_failed(builder, driver.call(builder, "cuDeviceGet",
                                                 [dev, ir.Constant(_i32, 0)]))
    driver.return_if_failed(builder, driver.call(
        builder, "cuDevicePrimaryCtxRetain", [ctx, builder.load(dev)]))
    builder.ret(driver.call(builder, "cuCtxSetCurrent", [builder.load(ctx)]))


def emit_ensure_context(builder):
    """Emit making device 0's primary context current for a thread with none
    (a thread that has one keeps it); returns the status (0 on success)."""
    return builder.call(_ensure_context(builder.module), [])


def emit_with_context(builder, emit_call):
    """Emit binding a context as :func:`emit_ensure_context` does, then
    *emit_call()* (a driver call returning its ``CUresult``) if that
    succeeded; returns the status. For calls whose answer with no context
    current must never be relied on."""
    status = cgutils.alloca_once_value(builder, emit_ensure_context(builder))
    with builder.if_then(builder.icmp_signed("==", builder.load(status), ir.Constant(_i32, 0)),
                         likely=True):
        builder.store(emit_call(), status)
    return builder.load(status)


def emit_in_context(builder, emit_call):
    """Emit *emit_call()* (emits a driver call, returns its ``CUresult``);
    when it fails for want of a context (``CUDA_ERROR_INVALID_CONTEXT``, or
    ``CUDA_ERROR_NOT_INITIALIZED`` in a process that never initialised the
    driver), initialise the driver, bind a context as
    :func:`emit_ensure_context` does and emit it again. Returns the
    status. The common case costs one compare: no context query first."""
    status = cgutils.alloca_once_value(builder, emit_call())
    first = builder.load(status)
    retry = builder.or_(
        builder.icmp_signed("==", first, ir.Constant(_i32, CUDA_ERROR_INVALID_CONTEXT)),
        builder.icmp_signed("==", first, ir.Constant(_i32, CUDA_ERROR_NOT_INITIALIZED)))
    with builder.if_then(retry, likely=False):
        bound = driver.call(builder, "cuInit", [ir.Constant(_i32, 0)])
        with builder.if_then(builder.icmp_signed("==", bound, ir.Constant(_i32, 0))):
            bound = emit_ensure_context(builder)
            with builder.if_then(builder.icmp_signed("==", bound, ir.Constant(_i32, 0))):
                builder.store(emit_call(), status)
    return builder.load(status)
