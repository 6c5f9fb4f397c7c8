"""CUDA events in nopython code and Python: ``event()``, reference-counted
(released with its last reference or by ``destroy()``), with ``record``,
``synchronize``, ``query``, ``elapsed_time`` and their ``*_status`` forms.
See docs/events.md.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.extending import (
    NativeValue,
    box,
    intrinsic,
    models,
    overload,
    overload_attribute,
    overload_method,
    register_model,
    typeof_impl,
    unbox,
)

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_HANDLE, CudaError, NopythonUsageError
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.caching import record_driver_calls
from numba_cuda_launch.launch.refusals import raiser
from numba_cuda_launch.launch.sync import (
    check_status,
    check_stream,
    emit_on_stream,
    jitted_call,
    query_result,
    status_check,
    status_intrinsic,
)
from numba_cuda_launch.launch.stream import Stream, python_stream
from numba_cuda_launch.cudadrv import events as _events

__all__ = ["Event", "EventType", "event_type", "event", "event_status"]

_i32 = ir.IntType(32)
_i8p = ir.IntType(8).as_pointer()


class EventType(types.Type):
    """The nopython type of a CUDA event."""

    def __init__(self):
        super().__init__(name="CUDAEvent")


event_type = EventType()


@register_model(EventType)
class EventModel(models.StructModel):
    # The meminfo owns the event's payload (runtime.events.EVENT_PAYLOAD) and
    # makes the value reference-counted; its destructor destroys the event.
    def __init__(self, dmm, fe_type):
        super().__init__(dmm, fe_type, [("meminfo", types.MemInfoPointer(types.voidptr))])


def _payload(context, builder, ty, value):
    meminfo = cgutils.create_struct_proxy(ty)(context, builder, value=value).meminfo
    return context.nrt.meminfo_data(builder, meminfo)


# -- what compiled code calls ------------------------------------------------

@intrinsic
def _event_new(typingctx, flags):
    """(status, event) for a new event with *flags*; the event holds no
    CUevent when status is not 0."""
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        size = _events.EVENT_PAYLOAD.get_abi_size(context.target_data)
        dtor = _events.event_destructor(builder.module)
        meminfo = context.nrt.meminfo_alloc_dtor(
            builder, context.get_constant(types.uintp, size), dtor)
        with cgutils.if_unlikely(builder, cgutils.is_null(builder, meminfo)):
            context.call_conv.return_user_exc(builder, MemoryError,
                                              ("cannot allocate a CUDA event",))
        payload = context.nrt.meminfo_data(builder, meminfo)
        flags = context.cast(builder, args[0], sig.args[0], types.int32)
        status = BACKEND.runtime(context).emit_event_create(builder, payload, flags)
        ev = cgutils.create_struct_proxy(event_type)(context, builder)
        ev.meminfo = meminfo
        return context.make_tuple(builder, sig.return_type, [status, ev._getvalue()])
    return types.Tuple((types.int32, event_type))(flags), codegen


@intrinsic
def _event_record(typingctx, ev, stream):
    """``(status, reason)``, as :func:`..sync.emit_on_stream` gives them."""
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        payload = _payload(context, builder, sig.args[0], args[0])
        status, reason = emit_on_stream(
            context, builder, sig.args[1], args[1],
            lambda raw: BACKEND.runtime(context).emit_event_record(builder, payload, raw))
        flags = _events.payload_field(builder, payload, "flags")
        with builder.if_then(builder.icmp_signed("==", status, status.type(0)), likely=True):
            builder.store(builder.or_(builder.load(flags), ir.Constant(_i32, _events.RECORDED)),
                          flags)
        return context.make_tuple(builder, sig.return_type, [status, reason])
    return types.UniTuple(types.int32, 2)(ev, stream), codegen


_event_synchronize = status_intrinsic("emit_event_synchronize", _payload)
_event_query = status_intrinsic("emit_event_query", _payload)
_event_destroy = status_intrinsic("emit_event_destroy", _payload)


@intrinsic
def _event_elapsed_time(typingctx, start, end):
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        start = _payload(context, builder, sig.args[0], args[0])
        end = _payload(context, builder, sig.args[1], args[1])
        ms = cgutils.alloca_once_value(builder, ir.Constant(ir.FloatType(), 0.0))
        status = BACKEND.runtime(context).emit_event_elapsed_time(builder, ms, start, end)
        return context.make_tuple(builder, sig.return_type, [status, builder.load(ms)])
    return types.Tuple((types.int32, types.float32))(start, end), codegen


#: Why elapsed_time failed, by reason (from 1): each event checked in turn.
_ELAPSED_MESSAGES = tuple(
    text % which for which in ("start", "end") for text in (
        "the %s event was destroyed (or its creation failed)",
        "the %s event was made with timing=False (no timing data)",
        "the %s event was never recorded (call its record(stream) first)"))


@intrinsic
def _elapsed_reason(typingctx, start, end):
    """The index (from 1) in _ELAPSED_MESSAGES of why the driver cannot time
    *start* to *end*, or 0: asked after elapsed_time failed."""
    def codegen(context, builder, sig, args):
        reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
        problems = [p for ty, value in zip(sig.args, args)
                    for p in _events.event_problems(builder, _payload(context, builder, ty,
                                                                      value))]
        # Last first, so that the first problem found is the one kept.
        for index, problem in reversed(list(enumerate(problems, 1))):
            with builder.if_then(problem):
                builder.store(ir.Constant(_i32, index), reason)
        return builder.load(reason)
    return types.int32(start, end), codegen


@intrinsic
def _event_handle(typingctx, ev):
    def codegen(context, builder, sig, args):
        record_driver_calls(context)
        payload = _payload(context, builder, sig.args[0], args[0])
        return BACKEND.runtime(context).emit_event_handle(builder, payload)
    return types.voidptr(ev), codegen


# -- the public surface ------------------------------------------------------

def event(timing: bool = True, blocking: bool = False) -> Event:
    """A new CUDA event in this thread's context (device 0's primary context
    if it has none). ``timing=False``: ``CU_EVENT_DISABLE_TIMING``;
    ``blocking=True``: ``CU_EVENT_BLOCKING_SYNC``. Raises
    :class:`~numba_cuda_launch.CudaError` on failure."""
    status, ev = event_status(timing, blocking)
    check_status(status, "cuEventCreate")
    return ev


def event_status(timing: bool = True, blocking: bool = False) -> tuple[int, Event]:
    """:func:`event` returning ``(status, event)``: on failure the status is
    the ``CUresult`` and the event holds nothing (its methods report
    ``CUDA_ERROR_INVALID_HANDLE``)."""
    return jitted_call(event_status)(timing, blocking)


def _check_flags(where, timing, blocking):
    for name, ty in (("timing", timing), ("blocking", blocking)):
        if not isinstance(ty, types.Type) or isinstance(ty, types.Omitted):
            continue  # left out: the default value itself, or Omitted
        if not isinstance(types.unliteral(ty), types.Boolean):
            raise NopythonUsageError("%s: %s must be a bool, got %s" % (where, name, ty))


@njit
def _flags(timing, blocking):
    flags = 0
    if not timing:
        flags |= _events.CU_EVENT_DISABLE_TIMING
    if blocking:
        flags |= _events.CU_EVENT_BLOCKING_SYNC
    return np.int32(flags)


@overload(event, target="cpu")
def _ov_event(timing=True, blocking=False):
    _check_flags("numba_cuda_launch.event()", timing, blocking)
    check = status_check("cuEventCreate")

    def impl(timing=True, blocking=False):
        status, ev = _event_new(_flags(timing, blocking))
        check(status)
        return ev
    return impl


@overload(event_status, target="cpu")
def _ov_event_status(timing=True, blocking=False):
    _check_flags("numba_cuda_launch.event_status()", timing, blocking)
    return lambda timing=True, blocking=False: _event_new(_flags(timing, blocking))


def _raising(name, operation, intrinsic_fn, query=False):
    """The method *name* (raising; with *query*, answering True/False) and
    *name*``_status`` (the ``CUresult``): *intrinsic_fn*'s status."""
    @overload_method(EventType, name, target="cpu")
    def method(ev):
        check = status_check(operation, query)
        return lambda ev: check(intrinsic_fn(ev))

    @overload_method(EventType, name + "_status", target="cpu")
    def method_status(ev):
        return lambda ev: intrinsic_fn(ev)


_raising("synchronize", "cuEventSynchronize", _event_synchronize)
_raising("destroy", "cuEventDestroy", _event_destroy)
_raising("query", "cuEventQuery", _event_query, query=True)


@overload_method(EventType, "record", target="cpu")
def _record(ev, stream=0):
    check_stream("CUDAEvent.record()", stream)
    check = status_check("cuEventRecord")

    def impl(ev, stream=0):
        status, reason = _event_record(ev, stream)
        check(status, reason)
    return impl


@overload_method(EventType, "record_status", target="cpu")
def _record_status(ev, stream=0):
    check_stream("CUDAEvent.record_status()", stream)
    return lambda ev, stream=0: _event_record(ev, stream)[0]


def _check_end(where, end):
    if end != event_type:
        raise NopythonUsageError("%s: the end event must be a CUDA event made by "
                                 "numba_cuda_launch.event(), got %s" % (where, end))


_fail_elapsed = raiser(CudaError, ("cuEventElapsedTime",), tuple(
    (i, ("cuEventElapsedTime", text)) for i, text in enumerate(_ELAPSED_MESSAGES, 1)))


@overload_method(EventType, "elapsed_time", target="cpu")
def _elapsed_time(start, end):
    _check_end("CUDAEvent.elapsed_time()", end)

    def impl(start, end):
        status, ms = _event_elapsed_time(start, end)
        if status != 0:
            _fail_elapsed(status, _elapsed_reason(start, end)
                          if status == CUDA_ERROR_INVALID_HANDLE else 0)
        return ms
    return impl


@overload_method(EventType, "elapsed_time_status", target="cpu")
def _elapsed_time_status(start, end):
    _check_end("CUDAEvent.elapsed_time_status()", end)
    return lambda start, end: _event_elapsed_time(start, end)


@overload_attribute(EventType, "handle", target="cpu")
def _handle(ev):
    return lambda ev: _event_handle(ev)


# -- from Python -------------------------------------------------------------

class Event:
    """A CUDA event returned to Python by nopython code, or made by
    :func:`event` called from Python. Its methods are those of the nopython
    value (run as compiled code); it is released when collected."""

    __slots__ = ("_meminfo", "__weakref__")
    _meminfo: Any  # Numba's MemInfo of the event's payload

    @classmethod
    def _from_meminfo(cls, meminfo: Any) -> Event:
        self = object.__new__(cls)
        self._meminfo = meminfo
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make events with numba_cuda_launch.event()")

    # Each raises here, not in the compiled form (see sync.check_status); the
    # *_status forms run the nopython method of that name.

    def record(self, stream: Stream = 0) -> None:
        """Record the event on *stream* (``cuEventRecord``)."""
        check_status(self.record_status(stream), "cuEventRecord")

    def record_status(self, stream: Stream = 0) -> int:
        """:meth:`record`, returning the ``CUresult``."""
        return jitted_call("record_status", True)(self, python_stream(stream))

    def synchronize(self) -> None:
        """Wait until the work before the event's record has completed."""
        check_status(self.synchronize_status(), "cuEventSynchronize")

    def synchronize_status(self) -> int:
        """:meth:`synchronize`, returning the ``CUresult``."""
        return jitted_call("synchronize_status", True)(self)

    def query(self) -> bool:
        """True once the work before the event's record has completed."""
        return query_result(self.query_status(), "cuEventQuery")

    def query_status(self) -> int:
        """``cuEventQuery``'s ``CUresult``: 0 once completed,
        ``CUDA_ERROR_NOT_READY`` (600) while pending."""
        return jitted_call("query_status", True)(self)

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds from this event to *end* (both recorded, completed)."""
        status, ms = self.elapsed_time_status(end)
        if status == CUDA_ERROR_INVALID_HANDLE and isinstance(end, Event):
            reason = jitted_call(_elapsed_reason)(self, end)
            check_status(status, "cuEventElapsedTime",
                         _ELAPSED_MESSAGES[reason - 1] if reason else "")
        check_status(status, "cuEventElapsedTime")
        return ms

    def elapsed_time_status(self, end: Event) -> tuple[int, float]:
        """:meth:`elapsed_time` as ``(status, milliseconds)``."""
        return jitted_call("elapsed_time_status", True)(self, end)

    def destroy(self) -> None:
        """Release the event now rather than when collected."""
        check_status(self.destroy_status(), "cuEventDestroy")

    def destroy_status(self) -> int:
        """:meth:`destroy`, returning the ``CUresult``."""
        return jitted_call("destroy_status", True)(self)

    @property
    def handle(self) -> int:
        """The ``CUevent`` as an integer (0 once destroyed)."""
        return jitted_call(_event_handle)(self) or 0

    def __repr__(self) -> str:
        return "<numba_cuda_launch.Event handle=%#x>" % self.handle


@typeof_impl.register(Event)
def _typeof_event(val, c):
    return event_type


@box(EventType)
def _box_event(typ, val, c):
    meminfo = cgutils.create_struct_proxy(typ)(c.context, c.builder, value=val).meminfo
    boxed = c.box(types.MemInfoPointer(types.voidptr), meminfo)
    make = c.pyapi.unserialize(c.pyapi.serialize_object(Event._from_meminfo))
    out = c.pyapi.call_function_objargs(make, [boxed])
    c.pyapi.decref(make)
    c.pyapi.decref(boxed)
    return out


@unbox(EventType)
def _unbox_event(typ, obj, c):
    out = cgutils.create_struct_proxy(typ)(c.context, c.builder)
    out.meminfo = cgutils.get_null_value(
        c.context.get_value_type(types.MemInfoPointer(types.voidptr)))
    boxed = c.pyapi.object_getattr_string(obj, "_meminfo")
    ok = cgutils.alloca_once_value(c.builder, cgutils.false_bit)
    with c.builder.if_then(cgutils.is_not_null(c.builder, boxed), likely=True):
        native = c.unbox(types.MemInfoPointer(types.voidptr), boxed)
        c.pyapi.decref(boxed)
        with c.builder.if_then(c.builder.not_(native.is_error), likely=True):
            out.meminfo = native.value
            c.builder.store(cgutils.true_bit, ok)
    return NativeValue(out._getvalue(), is_error=c.builder.not_(c.builder.load(ok)))
