"""Synchronisation and CUDA events, as compiled code calls the driver.

Each ``emit_*`` function returns the ``CUresult`` (``i32``). An event lives in
an :data:`EVENT_PAYLOAD` that the nopython ``Event`` owns through a refcounted
Numba meminfo, whose destructor destroys it with the ``cuEventDestroy`` the
table held at creation: a recording fake's events never reach the real
driver, nor real ones the fake (docs/events.md, "Release").
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_HANDLE
from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.driver import emit_in_context, emit_with_context

__all__ = [
    "CU_EVENT_BLOCKING_SYNC",
    "CU_EVENT_DISABLE_TIMING",
    "EVENT_PAYLOAD",
    "emit_context_synchronize",
    "emit_stream_synchronize",
    "emit_stream_query",
    "emit_event_create",
    "emit_event_record",
    "emit_event_query",
    "emit_event_synchronize",
    "emit_event_elapsed_time",
    "emit_event_destroy",
    "emit_event_handle",
    "event_problems",
    "event_destructor",
    "RECORDED",
    "init_payload",
    "payload_field",
]

CU_EVENT_BLOCKING_SYNC = 0x1
CU_EVENT_DISABLE_TIMING = 0x2
#: Set in an event's payload flags (beside the CU_EVENT_* creation flags) once
#: it was recorded: what elapsed_time's error says of an event never recorded.
RECORDED = 0x40000000

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)

#: The memory an event value owns: (CUevent, CUcontext it was made in, the
#: cuEventDestroy to call, host milliseconds when recorded (simulator; NaN
#: before), creation flags).
EVENT_PAYLOAD = ir.LiteralStructType([_i8p, _i8p, _i8p, ir.DoubleType(), _i32])
_FIELDS = {"event": 0, "context": 1, "destroy": 2, "host_ms": 3, "flags": 4}
_DESTRUCTOR = "numba_cuda_launch_event_dtor"


def payload_field(builder, payload, name):
    """A pointer to field *name* of the :data:`EVENT_PAYLOAD` at *payload*
    (any pointer)."""
    payload = builder.bitcast(payload, EVENT_PAYLOAD.as_pointer())
    return builder.gep(payload, [ir.Constant(_i32, 0), ir.Constant(_i32, _FIELDS[name])],
                       inbounds=True)


def _i32c(value):
    return ir.Constant(_i32, value)


def emit_context_synchronize(builder):
    """``cuCtxSynchronize()`` in this thread's context. The context is
    bound first, not on failure: a wait is slow anyway, and what the driver
    answers with no context current is then never relied on."""
    return emit_in_context(builder, lambda: emit_with_context(
        builder, lambda: driver.call(builder, "cuCtxSynchronize", [])))


def emit_stream_synchronize(builder, stream):
    """``cuStreamSynchronize(stream)``; *stream* an ``i8*`` (NULL: the
    default stream)."""
    return emit_in_context(builder, lambda: driver.call(builder, "cuStreamSynchronize", [stream]))


def emit_stream_query(builder, stream):
    """``cuStreamQuery(stream)``: ``CUDA_SUCCESS`` when all work on it has
    completed, ``CUDA_ERROR_NOT_READY`` while some is pending."""
    return emit_in_context(builder, lambda: driver.call(builder, "cuStreamQuery", [stream]))


def init_payload(builder, payload, flags):
    """Fill in the payload at *payload* for an event with *flags* (``i32``)
    not made yet: no CUevent, context nor destroy function, not recorded."""
    for name in ("event", "context", "destroy"):
        builder.store(ir.Constant(_i8p, None), payload_field(builder, payload, name))
    builder.store(ir.Constant(ir.DoubleType(), float("nan")),
                  payload_field(builder, payload, "host_ms"))
    builder.store(flags, payload_field(builder, payload, "flags"))


def emit_event_create(builder, payload, flags):
    """Create an event with *flags* (``i32``) into the payload at *payload*,
    which it fills in whole; on failure the event is NULL."""
    init_payload(builder, payload, flags)
    event = payload_field(builder, payload, "event")
    status = emit_in_context(builder, lambda: driver.call(builder, "cuEventCreate", [event, flags]))
    with builder.if_then(builder.icmp_signed("==", status, _i32c(0)), likely=True):
        builder.store(driver.function_pointer(builder, "cuEventDestroy_v2"),
                      payload_field(builder, payload, "destroy"))
        # The context is only needed to destroy the event from a thread with
        # none current; a failed query leaves it NULL.
        driver.call(builder, "cuCtxGetCurrent", [payload_field(builder, payload, "context")])
    return status


def _with_event(builder, payload, emit):
    """*emit(event)* with the payload's ``CUevent``, or
    ``CUDA_ERROR_INVALID_HANDLE`` without calling the driver when there is
    none (destroyed, or its creation failed)."""
    status = cgutils.alloca_once_value(builder, _i32c(CUDA_ERROR_INVALID_HANDLE))
    event = builder.load(payload_field(builder, payload, "event"))
    with builder.if_then(cgutils.is_not_null(builder, event), likely=True):
        builder.store(emit(event), status)
    return builder.load(status)


def _event_call(builder, payload, name, *args):
    """``name(event, *args)`` with the payload's event, as :func:`_with_event`."""
    return _with_event(builder, payload, lambda ev: emit_in_context(
        builder, lambda: driver.call(builder, name, [ev, *args])))


def emit_event_record(builder, payload, stream):
    """``cuEventRecord(event, stream)``."""
    return _event_call(builder, payload, "cuEventRecord", stream)


def emit_event_query(builder, payload):
    """``cuEventQuery(event)``: ``CUDA_SUCCESS`` when the work it waits for
    has completed (or it was never recorded), ``CUDA_ERROR_NOT_READY``
    before."""
    return _event_call(builder, payload, "cuEventQuery")


def emit_event_synchronize(builder, payload):
    """``cuEventSynchronize(event)``."""
    return _event_call(builder, payload, "cuEventSynchronize")


def emit_event_elapsed_time(builder, ms, start, end):
    """``cuEventElapsedTime(ms, start, end)``; *ms* a ``float*``, *start*
    and *end* payload pointers."""
    def with_end(start_event):
        return _with_event(builder, end, lambda end_event: emit_in_context(
            builder, lambda: driver.call(builder, "cuEventElapsedTime",
                                         [ms, start_event, end_event])))
    return _with_event(builder, start, with_end)


def event_problems(builder, payload):
    """Why the event at *payload* cannot be timed: ``i1`` flags, destroyed
    (or never made), made without timing, never recorded."""
    flags = builder.load(payload_field(builder, payload, "flags"))
    return [cgutils.is_null(builder, builder.load(payload_field(builder, payload, "event")))] + [
        builder.icmp_signed(op, builder.and_(flags, _i32c(bit)), _i32c(0))
        for op, bit in (("!=", CU_EVENT_DISABLE_TIMING), ("==", RECORDED))]


def emit_event_handle(builder, payload):
    """The payload's ``CUevent`` (``i8*``; NULL once destroyed)."""
    return builder.load(payload_field(builder, payload, "event"))


@driver.cold_function("numba_cuda_launch_event_destroy", (_i8p,))
def _destroy_function(fn, builder):
    """``i32 destroy(payload*)``: destroy the payload's event with the
    ``cuEventDestroy`` it was created with and forget it; 0 when there was
    none. A thread with no current context makes the event's own context
    current for the call, then restores the thread's (none)."""
    payload = fn.args[0]
    event_slot = payload_field(builder, payload, "event")
    event = builder.load(event_slot)
    destroy = builder.load(payload_field(builder, payload, "destroy"))
    builder.store(ir.Constant(_i8p, None), event_slot)
    with builder.if_then(builder.or_(cgutils.is_null(builder, event),
                                     cgutils.is_null(builder, destroy))):
        builder.ret(_i32c(0))
    fnty = ir.FunctionType(_i32, (_i8p,))
    destroy = builder.bitcast(destroy, fnty.as_pointer())
    status = builder.call(destroy, [event])
    no_context = builder.icmp_signed("==", status, _i32c(CUDA_ERROR_INVALID_CONTEXT))
    with builder.if_then(no_context, likely=False):
        previous = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
        driver.call(builder, "cuCtxGetCurrent", [previous])
        context = builder.load(payload_field(builder, payload, "context"))
        with builder.if_then(cgutils.is_not_null(builder, context)):
            driver.call(builder, "cuCtxSetCurrent", [context])
            again = builder.call(destroy, [event])
            driver.call(builder, "cuCtxSetCurrent", [builder.load(previous)])
            builder.ret(again)
    builder.ret(status)


def emit_event_destroy(builder, payload):
    """Destroy the payload's event now (``cuEventDestroy``); later uses of
    the event report ``CUDA_ERROR_INVALID_HANDLE`` and a second destroy does
    nothing (returns 0)."""
    return builder.call(_destroy_function(builder.module),
                        [builder.bitcast(payload, _i8p)])


def event_destructor(module):
    """The Numba meminfo destructor of an event value,
    ``void dtor(void* payload, size_t size, void* info)``: destroys the event
    unless ``destroy()`` did; errors are dropped (there is no one to report
    them to, and a driver already shut down at exit refuses every call)."""
    fn = module.globals.get(_DESTRUCTOR)
    if fn is not None:
        return fn
    fnty = ir.FunctionType(ir.VoidType(), (_i8p, _i64, _i8p))
    fn = ir.Function(module, fnty, _DESTRUCTOR)
    fn.linkage = "internal"
    builder = ir.IRBuilder(fn.append_basic_block("entry"))
    builder.call(_destroy_function(module), [fn.args[0]])
    builder.ret_void()
    return fn
