"""Which streams are recording conditional nodes' bodies, and for which
graphs, and which WHILE nodes are in graphs still being recorded: two
process-wide tables compiled code keeps as bodies begin and end and WHILE
nodes are appended (bound to symbols, as the driver table is). The driver
crashes the process when the recording of a graph ends while a body of one
of its nodes is still being recorded and the graph is then used (checked on
driver 580, CUDA 13.0), so ending such a recording, or aborting it, is
refused until its bodies end; a WHILE node whose body is empty would loop
for ever on a GPU, so the recording holding it does not end until its body
has a node (docs/graphs.md, "Conditional nodes").
"""

import ctypes

from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver

__all__ = ["SLOTS", "SYMBOL", "WHILE_SLOTS", "WHILE_SYMBOL", "open_bodies", "pending_whiles",
           "emit_claim", "emit_record", "emit_release", "emit_children_open",
           "emit_records_body", "emit_note_while", "emit_empty_while", "emit_forget_whiles"]

#: Bodies that can be recorded at once in a process.
SLOTS = 64
SYMBOL = "numba_cuda_launch_open_bodies"

_i1 = ir.IntType(1)
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_i8p = ir.IntType(8).as_pointer()
_SLOT = ir.LiteralStructType([_i64, _i64, _i64])  # stream, body graph, parent graph
_STREAM, _BODY, _PARENT = 0, 1, 2


class _Slot(ctypes.Structure):
    _fields_ = [("stream", ctypes.c_uint64), ("body", ctypes.c_uint64),
                ("parent", ctypes.c_uint64)]


_TABLE = (_Slot * SLOTS)()
llvm_binding.add_symbol(SYMBOL, ctypes.addressof(_TABLE))

#: WHILE nodes whose recording has not ended, at once in a process (past
#: that, further ones are not checked for an empty body).
WHILE_SLOTS = 256
WHILE_SYMBOL = "numba_cuda_launch_pending_whiles"
_WHILE = ir.LiteralStructType([_i64, _i64])  # body graph, the graph holding the node
_WHILE_BODY, _WHILE_PARENT = 0, 1


class _WhileSlot(ctypes.Structure):
    _fields_ = [("body", ctypes.c_uint64), ("parent", ctypes.c_uint64)]


_WHILE_TABLE = (_WhileSlot * WHILE_SLOTS)()
llvm_binding.add_symbol(WHILE_SYMBOL, ctypes.addressof(_WHILE_TABLE))


def open_bodies():
    """``[(body stream, body graph, parent graph)]`` being recorded now."""
    return [(s.stream, s.body, s.parent) for s in _TABLE if s.stream]


def pending_whiles():
    """``[(body graph, graph holding the WHILE node)]`` of the WHILE nodes
    whose graph's recording has not ended."""
    return [(s.body, s.parent) for s in _WHILE_TABLE if s.body]


def _field(builder, index, field):
    table = driver.process_global(builder.module, SYMBOL, ir.ArrayType(_SLOT, SLOTS))
    return builder.gep(table, [ir.Constant(_i32, 0), index, ir.Constant(_i32, field)],
                       inbounds=True)


def _load(builder, index, field):
    return builder.load_atomic(_field(builder, index, field), "monotonic", 8)


def _as_i64(builder, value):
    return builder.ptrtoint(value, _i64) if value.type == _i8p else value


def emit_claim(builder, stream):
    """Take a free slot for body stream *stream*: its index (``i32``), -1
    when all :data:`SLOTS` are taken."""
    found = cgutils.alloca_once_value(builder, ir.Constant(_i32, -1))
    stream = _as_i64(builder, stream)
    with cgutils.for_range(builder, ir.Constant(_i32, SLOTS)) as loop:
        free = builder.icmp_signed("<", builder.load(found), ir.Constant(_i32, 0))
        with builder.if_then(free):
            _, taken = cgutils.unpack_tuple(builder, builder.cmpxchg(
                _field(builder, loop.index, _STREAM), ir.Constant(_i64, 0), stream,
                "seq_cst", "seq_cst"), 2)
            with builder.if_then(taken):
                builder.store(loop.index, found)
    return builder.load(found)


def emit_record(builder, index, body, parent):
    """Slot *index* (claimed) records into graph *body*, a body of a node of
    graph *parent*."""
    builder.store_atomic(_as_i64(builder, body), _field(builder, index, _BODY), "seq_cst", 8)
    builder.store_atomic(_as_i64(builder, parent), _field(builder, index, _PARENT), "seq_cst", 8)


def _clear(builder, index):
    for field in (_PARENT, _BODY, _STREAM):  # the stream last: the slot is free then
        builder.store_atomic(ir.Constant(_i64, 0), _field(builder, index, field), "seq_cst", 8)


def emit_release(builder, stream):
    """Free the slot of body stream *stream*, if it has one."""
    stream = _as_i64(builder, stream)
    with cgutils.for_range(builder, ir.Constant(_i32, SLOTS)) as loop:
        with builder.if_then(builder.icmp_unsigned("==", _load(builder, loop.index, _STREAM),
                                                   stream)):
            _clear(builder, loop.index)


def emit_records_body(builder, stream):
    """An ``i1``: *stream* is recording a body (it has a slot)."""
    stream = _as_i64(builder, stream)
    found = cgutils.alloca_once_value(builder, ir.Constant(_i1, 0))
    with cgutils.for_range(builder, ir.Constant(_i32, SLOTS)) as loop:
        with builder.if_then(builder.icmp_unsigned("==", _load(builder, loop.index, _STREAM),
                                                   stream)):
            builder.store(ir.Constant(_i1, 1), found)
    return builder.load(found)


def emit_children_open(builder, graph, is_capturing):
    """An ``i1``: a body of a node of *graph* is being recorded.
    *is_capturing(stream)* (emits an ``i1``) asks the driver: a slot whose
    stream no longer captures (its capture ended another way) is freed."""
    graph = _as_i64(builder, graph)
    found = cgutils.alloca_once_value(builder, ir.Constant(_i1, 0))
    with builder.if_then(builder.icmp_unsigned("!=", graph, ir.Constant(_i64, 0))):
        with cgutils.for_range(builder, ir.Constant(_i32, SLOTS)) as loop:
            stream = _load(builder, loop.index, _STREAM)
            mine = builder.and_(builder.icmp_unsigned("!=", stream, ir.Constant(_i64, 0)),
                                builder.icmp_unsigned("==", _load(builder, loop.index, _PARENT),
                                                      graph))
            with builder.if_then(mine):
                with builder.if_else(is_capturing(builder.inttoptr(stream, _i8p))) as (
                        live, stale):
                    with live:
                        builder.store(ir.Constant(_i1, 1), found)
                    with stale:
                        _clear(builder, loop.index)
    return builder.load(found)


# -- WHILE nodes of recordings in progress ---------------------------------------------

def _while_field(builder, index, field):
    table = driver.process_global(builder.module, WHILE_SYMBOL,
                                  ir.ArrayType(_WHILE, WHILE_SLOTS))
    return builder.gep(table, [ir.Constant(_i32, 0), index, ir.Constant(_i32, field)],
                       inbounds=True)


def emit_note_while(builder, body, parent):
    """Note a WHILE node of graph *parent* (being recorded) whose body is
    graph *body*: its recording does not end while the body is empty.
    Nothing is noted when all :data:`WHILE_SLOTS` are taken."""
    body, parent = _as_i64(builder, body), _as_i64(builder, parent)
    done = cgutils.alloca_once_value(builder, ir.Constant(_i1, 0))
    with cgutils.for_range(builder, ir.Constant(_i32, WHILE_SLOTS)) as loop:
        with builder.if_then(builder.not_(builder.load(done))):
            _, taken = cgutils.unpack_tuple(builder, builder.cmpxchg(
                _while_field(builder, loop.index, _WHILE_BODY), ir.Constant(_i64, 0), body,
                "seq_cst", "seq_cst"), 2)
            with builder.if_then(taken):
                builder.store_atomic(parent, _while_field(builder, loop.index, _WHILE_PARENT),
                                     "seq_cst", 8)
                builder.store(ir.Constant(_i1, 1), done)


def _each_while_of(builder, graph):
    """A loop over the noted WHILE nodes of *graph* (``i64``): yields the
    slot index and the body graph (an ``i8*``)."""
    graph = _as_i64(builder, graph)
    with cgutils.for_range(builder, ir.Constant(_i32, WHILE_SLOTS)) as loop:
        body = builder.load_atomic(_while_field(builder, loop.index, _WHILE_BODY),
                                   "monotonic", 8)
        parent = builder.load_atomic(_while_field(builder, loop.index, _WHILE_PARENT),
                                     "monotonic", 8)
        mine = builder.and_(builder.icmp_unsigned("!=", body, ir.Constant(_i64, 0)),
                            builder.icmp_unsigned("==", parent, graph))
        with builder.if_then(builder.and_(mine, builder.icmp_unsigned(
                "!=", graph, ir.Constant(_i64, 0)))):
            yield loop.index, builder.inttoptr(body, _i8p)


def emit_empty_while(builder, graph, node_count):
    """An ``i1``: a noted WHILE node of *graph* has an empty body.
    *node_count(body)* emits the number of nodes of a graph (``i64``; a
    failed query reads as not empty)."""
    found = cgutils.alloca_once_value(builder, ir.Constant(_i1, 0))
    for _, body in _each_while_of(builder, graph):
        empty = builder.icmp_unsigned("==", node_count(body), ir.Constant(_i64, 0))
        with builder.if_then(empty):
            builder.store(ir.Constant(_i1, 1), found)
    return builder.load(found)


def emit_forget_whiles(builder, graph):
    """Forget the noted WHILE nodes of *graph*: its recording ended."""
    for index, _ in _each_while_of(builder, graph):
        builder.store_atomic(ir.Constant(_i64, 0), _while_field(builder, index, _WHILE_PARENT),
                             "seq_cst", 8)
        builder.store_atomic(ir.Constant(_i64, 0), _while_field(builder, index, _WHILE_BODY),
                             "seq_cst", 8)
