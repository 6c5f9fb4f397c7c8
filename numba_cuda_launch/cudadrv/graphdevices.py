"""Which device each CUDA graph with conditional nodes, and each executable
graph made from one, belongs to: a process-wide table compiled code keeps
(bound to a symbol, as the driver table is), so that a replay of such a
graph on a stream of another device is refused before the driver is asked.
The driver runs a graph's nodes in the context they were recorded in,
whatever stream launches it; for conditional nodes, whose handles and
bodies belong to one context, the package refuses the other device
(docs/devices.md, "Graphs and conditional nodes").
"""

import ctypes

from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver

__all__ = ["SLOTS", "SYMBOL", "USED_SYMBOL", "known_devices", "emit_note", "emit_device_of",
           "emit_forget"]

#: Graphs and executable graphs with conditional nodes known at once; past
#: that, a graph is not noted and its replays are not checked.
SLOTS = 256
SYMBOL = "numba_cuda_launch_graph_devices"
#: Nonzero once a graph was noted: until then nothing else reads the table.
USED_SYMBOL = "numba_cuda_launch_graph_devices_used"

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_SLOT = ir.LiteralStructType([_i64, _i64])  # handle (0: free), device
_HANDLE, _DEVICE = 0, 1


class _Slot(ctypes.Structure):
    _fields_ = [("handle", ctypes.c_uint64), ("device", ctypes.c_int64)]


_TABLE = (_Slot * SLOTS)()
_USED = ctypes.c_int32(0)
llvm_binding.add_symbol(SYMBOL, ctypes.addressof(_TABLE))
llvm_binding.add_symbol(USED_SYMBOL, ctypes.addressof(_USED))


def known_devices():
    """``{handle: device}`` of the graphs and executable graphs noted now."""
    return {s.handle: s.device for s in _TABLE if s.handle}


def _field(builder, index, field):
    table = driver.process_global(builder.module, SYMBOL, ir.ArrayType(_SLOT, SLOTS))
    return builder.gep(table, [ir.Constant(_i32, 0), index, ir.Constant(_i32, field)],
                       inbounds=True)


def _find(builder, handle):
    """The index (``i32``) of *handle*'s slot (an ``i64``), -1 if none."""
    found = cgutils.alloca_once_value(builder, ir.Constant(_i32, -1))
    with cgutils.for_range(builder, ir.Constant(_i32, SLOTS)) as loop:
        mine = builder.icmp_unsigned("==", builder.load_atomic(
            _field(builder, loop.index, _HANDLE), "acquire", 8), handle)
        with builder.if_then(mine):
            builder.store(loop.index, found)
    return builder.load(found)


@driver.cold_function("numba_cuda_launch_graph_device_note", (_i64, _i32))
def _note(fn, builder):
    """``i32 note(handle, device)``: remember *handle*'s device (in its slot,
    else a free one; nothing when all are taken)."""
    handle, device = fn.args
    used = driver.process_global(builder.module, USED_SYMBOL, _i32)
    builder.store_atomic(ir.Constant(_i32, 1), used, "release", 4)
    index = cgutils.alloca_once_value(builder, _find(builder, handle))
    with builder.if_then(builder.icmp_signed("<", builder.load(index), ir.Constant(_i32, 0))):
        with cgutils.for_range(builder, ir.Constant(_i32, SLOTS)) as loop:
            free = builder.icmp_signed("<", builder.load(index), ir.Constant(_i32, 0))
            with builder.if_then(free):
                # the device first: a reader that finds the handle finds it
                claimed = builder.extract_value(builder.cmpxchg(
                    _field(builder, loop.index, _HANDLE), ir.Constant(_i64, 0),
                    ir.Constant(_i64, -1), "acq_rel", "monotonic"), 1)
                with builder.if_then(claimed):
                    builder.store(loop.index, index)
    with builder.if_then(builder.icmp_signed(">=", builder.load(index), ir.Constant(_i32, 0))):
        builder.store_atomic(builder.sext(device, _i64),
                             _field(builder, builder.load(index), _DEVICE), "release", 8)
        builder.store_atomic(handle, _field(builder, builder.load(index), _HANDLE),
                             "release", 8)
    builder.ret(ir.Constant(_i32, 0))


# optimised: every graph launch asks it once a graph with conditional nodes
# was noted
@driver.cold_function("numba_cuda_launch_graph_device_of", (_i64,), optimised=True)
def _device_of(fn, builder):
    """``i32 device_of(handle)``: its device, -1 when not noted."""
    (handle,) = fn.args
    index = _find(builder, handle)
    with builder.if_then(builder.icmp_signed("<", index, ir.Constant(_i32, 0))):
        builder.ret(ir.Constant(_i32, -1))
    builder.ret(builder.trunc(builder.load_atomic(_field(builder, index, _DEVICE), "acquire",
                                                  8), _i32))


@driver.cold_function("numba_cuda_launch_graph_device_forget", (_i64,))
def _forget(fn, builder):
    """``i32 forget(handle)``: free *handle*'s slot, if it has one."""
    (handle,) = fn.args
    index = _find(builder, handle)
    with builder.if_then(builder.icmp_signed(">=", index, ir.Constant(_i32, 0))):
        builder.store_atomic(ir.Constant(_i64, 0), _field(builder, index, _HANDLE), "release", 8)
    builder.ret(ir.Constant(_i32, 0))


def _as_i64(builder, handle):
    return builder.ptrtoint(handle, _i64) if handle.type == _i8p else handle


def _used(builder):
    flag = driver.process_global(builder.module, USED_SYMBOL, _i32)
    return builder.icmp_signed("!=", builder.load_atomic(flag, "acquire", 4),
                               ir.Constant(_i32, 0))


def emit_note(builder, handle, device):
    """Note that graph or executable graph *handle* belongs to *device*
    (``i32``)."""
    builder.call(_note(builder.module), [_as_i64(builder, handle), device])


def emit_device_of(builder, handle):
    """The device (``i32``) noted for *handle*, -1 for none; one load when
    no graph was ever noted in the process."""
    device = cgutils.alloca_once_value(builder, ir.Constant(_i32, -1))
    with builder.if_then(_used(builder), likely=False):
        builder.store(builder.call(_device_of(builder.module), [_as_i64(builder, handle)]),
                      device)
    return builder.load(device)


def emit_forget(builder, handle):
    """Forget *handle* (destroyed, or a handle the driver may give again)."""
    with builder.if_then(_used(builder), likely=False):
        builder.call(_forget(builder.module), [_as_i64(builder, handle)])
