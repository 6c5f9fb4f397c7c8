"""A launch waits for the producer stream its device arrays carry (CUDA
Array Interface v3): nothing when it launches on that stream, else a
``cuStreamSynchronize`` remembered for the rest of the call, except for the
legacy default stream during a graph capture. The exact rule: "Producer
streams" in ``docs/devicearrays.md``.
"""

from llvmlite import ir
from numba.core import cgutils, types

from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray, device_array_parts
from numba_cuda_launch.cudadrv import events as _events
from numba_cuda_launch.cudadrv.graph import CAPTURE_RELAXED, emit_exchange_capture_mode, \
    emit_is_capturing

__all__ = ["producer_streams", "emit_producer_wait", "forget_waits"]

_i64 = ir.IntType(64)
_REMEMBERED = 4  # producer streams a function call remembers having synchronised
_LEGACY = 1  # CU_STREAM_LEGACY, the CAI v3 name of the legacy default stream


def producer_streams(context, builder, ty, val, where):
    """``[(producer_stream, where), ...]`` of the device arrays in an
    argument of type *ty* (tuples searched)."""
    if isinstance(ty, types.BaseTuple):
        out = []
        for i, t in enumerate(ty):
            out += producer_streams(context, builder, t, builder.extract_value(val, i),
                                    "%s[%d]" % (where, i))
        return out
    if isinstance(ty, DeviceArray):
        return [(device_array_parts(context, builder, ty, val)[1], where)]
    return []


def _function_slot(builder, name, initial):
    """An ``i64`` slot of the function being built, set to *initial* in its
    entry block: what one call of it has learnt, shared by its launches."""
    fn = builder.function
    slots = fn.__dict__.setdefault("_ncl_slots", {})
    if name not in slots:
        with builder.goto_entry_block():
            slots[name] = builder.alloca(_i64, name=name)
            builder.store(ir.Constant(_i64, initial), slots[name])
    return slots[name]


def _slots(builder):
    return [_function_slot(builder, "ncl.waited_stream.%d" % i, 0) for i in range(_REMEMBERED)]


def forget_waits(builder):
    """Emit forgetting which producer streams the function being built has
    waited for (Python ran, and may have queued work on them)."""
    for slot in _slots(builder):
        builder.store(_i64(0), slot)


def emit_producer_wait(builder, producer, launch_stream):
    """Emit the producer-stream rule for *producer* (``i64``) before a launch
    on *launch_stream* (``i8*``); returns the ``CUresult`` (``i32``, 0 when
    nothing had to be done)."""
    status = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(32), 0))
    launch = builder.ptrtoint(launch_stream, _i64)
    same = builder.or_(
        builder.icmp_unsigned("==", producer, launch),
        builder.and_(builder.icmp_unsigned("==", launch, _i64(0)),
                     builder.icmp_unsigned("==", producer, _i64(_LEGACY))))
    slots = _slots(builder)
    needed = builder.and_(builder.icmp_unsigned("!=", producer, _i64(0)), builder.not_(same))
    for slot in slots:
        needed = builder.and_(needed, builder.icmp_unsigned("!=", producer, builder.load(slot)))
    wait = cgutils.alloca_once_value(builder, cgutils.false_bit)
    capturing = cgutils.alloca_once_value(builder, cgutils.false_bit)
    with builder.if_then(needed, likely=False):
        builder.store(emit_is_capturing(builder, launch_stream), capturing)
        legacy = builder.icmp_unsigned("==", producer, _i64(_LEGACY))
        builder.store(builder.not_(builder.and_(legacy, builder.load(capturing))), wait)
    with builder.if_then(builder.load(wait), likely=False):
        # During a capture a synchronisation is a "potentially unsafe" call
        # (refused in the global and thread-local modes): this thread makes
        # it in the relaxed mode, then restores its mode.
        mode = cgutils.alloca_once_value(builder, ir.Constant(ir.IntType(32), CAPTURE_RELAXED))
        with builder.if_then(builder.load(capturing), likely=False):
            emit_exchange_capture_mode(builder, mode)
        done = _events.emit_stream_synchronize(
            builder, builder.inttoptr(producer, ir.IntType(8).as_pointer()))
        with builder.if_then(builder.load(capturing), likely=False):
            emit_exchange_capture_mode(builder, mode)
        builder.store(done, status)
        with builder.if_then(builder.icmp_signed("==", done, done.type(0)), likely=True):
            # Remember it in the next slot, round robin.
            next_slot = _function_slot(builder, "ncl.waited_stream.next", 0)
            index = builder.load(next_slot)
            for i, slot in enumerate(slots):
                with builder.if_then(builder.icmp_signed("==", index, index.type(i))):
                    builder.store(producer, slot)
            builder.store(builder.urem(builder.add(index, index.type(1)),
                                       index.type(_REMEMBERED)), next_slot)
    return builder.load(status)
