"""Conditional graph nodes at run time: the driver calls that make a
conditional handle in the graph a stream is recording, append an IF, WHILE
or SWITCH node to that recording (noting the graph's device,
:mod:`.graphdevices`), and record a node's body on a second stream
(``cuStreamBeginCaptureToGraph``), emitted for compiled code.

Each emitter returns the ``CUresult`` (``i32``), a reason (``i32``, one of
the ``REASON_*`` values, 0 when the driver's status says it all) and what
the driver handed back. The struct layouts are those of ``cuda.h`` (CUDA
12.4 to 13.x, 64-bit), checked against cuda-bindings' structures. The
nopython surface is :mod:`numba_cuda_launch.launch.conditional`
(docs/graphs.md, "Conditional nodes").
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.errors import (CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_NOT_SUPPORTED,
                                      CUDA_ERROR_OUT_OF_MEMORY,
                                      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
from numba_cuda_launch.cudadrv import bodies, driver, graphdevices
from numba_cuda_launch.cudadrv.driver import emit_context_device, emit_with_context
from numba_cuda_launch.cudadrv.graph import emit_is_capturing, emit_node_count

__all__ = [
    "COND_IF", "COND_WHILE", "COND_SWITCH", "KIND_NAMES", "ASSIGN_DEFAULT",
    "NODE_TYPE_CONDITIONAL", "SET_CAPTURE_DEPENDENCIES", "driver_needed", "version_text",
    "REASON_OLD_DRIVER", "REASON_NOT_CAPTURING", "REASON_INVALIDATED", "REASON_BODY_RECORDED",
    "node_params_type", "emit_driver_version", "emit_handle_create", "emit_add_conditional",
    "emit_begin_body",
]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_NULL = ir.Constant(_i8p, None)

#: CUgraphConditionalNodeType
COND_IF, COND_WHILE, COND_SWITCH = 0, 1, 2
KIND_NAMES = {COND_IF: "IF", COND_WHILE: "WHILE", COND_SWITCH: "SWITCH"}
#: cuGraphConditionalHandleCreate's flag: the default is assigned at the
#: start of each launch of the graph.
ASSIGN_DEFAULT = 1
#: CUgraphNodeType of conditional nodes
NODE_TYPE_CONDITIONAL = 13
#: CUstreamUpdateCaptureDependencies_flags: replace the dependency set
SET_CAPTURE_DEPENDENCIES = 1
_CAPTURE_STATUS_ACTIVE, _CAPTURE_STATUS_INVALIDATED = 1, 2

#: Why an emitter refused (0: the driver's status says it all).
REASON_OLD_DRIVER, REASON_NOT_CAPTURING, REASON_INVALIDATED = 1, 2, 3
#: begin_body's refusal of a body that has nodes already
REASON_BODY_RECORDED = 4


def driver_needed(kind, size):
    """The ``cuDriverGetVersion`` value a node of *kind* with *size* bodies
    needs: IF (one body) and WHILE 12.4, IF/ELSE (two) and SWITCH 12.8."""
    return 12080 if kind == COND_SWITCH or (kind == COND_IF and size > 1) else 12040


def version_text(version):
    """``12040`` as ``"12.4"``."""
    return "%d.%d" % (version // 1000, version % 1000 // 10)


def node_params_type():
    """``CUgraphNodeParams`` holding ``CUDA_CONDITIONAL_NODE_PARAMS`` (256
    bytes): type (``i32``) and 12 reserved bytes, then the union at offset
    16: handle (``u64``), type and size (``unsigned``), ``phGraph_out`` (the
    driver's array of body graphs, an out-parameter) at 32 and ctx at 40;
    the rest of the union and ``reserved2`` zero."""
    return ir.LiteralStructType([_i32, ir.ArrayType(_i32, 3), _i64, _i32, _i32, _i8p, _i8p,
                                 ir.ArrayType(_i64, 26)])


def _ok(builder, slot):
    return builder.icmp_signed("==", builder.load(slot), ir.Constant(_i32, 0))


def _refuse(builder, status_slot, reason_slot, status, reason):
    builder.store(ir.Constant(_i32, status), status_slot)
    builder.store(ir.Constant(_i32, reason), reason_slot)


def emit_driver_version(builder):
    """``cuDriverGetVersion``: ``(status, version)`` (``12040`` for 12.4)."""
    version = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    status = driver.call(builder, "cuDriverGetVersion", [version])
    return status, builder.load(version)


def _check_driver(builder, status, reason, needed):
    """Refuse (``CUDA_ERROR_NOT_SUPPORTED``, :data:`REASON_OLD_DRIVER`) a
    driver older than *needed* (an ``i32``)."""
    got, version = emit_driver_version(builder)
    builder.store(got, status)
    with builder.if_then(builder.and_(_ok(builder, status),
                                      builder.icmp_signed("<", version, needed)), likely=False):
        _refuse(builder, status, reason, CUDA_ERROR_NOT_SUPPORTED, REASON_OLD_DRIVER)


def _capture_info(builder, stream, status, reason):
    """``cuStreamGetCaptureInfo_v3`` of *stream*: slots of the graph being
    recorded, its dependencies (nodes and edge data) and their count;
    refuses (``CUDA_ERROR_ILLEGAL_STATE``) a stream that is not capturing.
    Emitted only while *status* holds 0."""
    state = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    ident = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
    graph = cgutils.alloca_once_value(builder, _NULL)
    deps = cgutils.alloca_once_value(builder, ir.Constant(_i8p.as_pointer(), None))
    edges = cgutils.alloca_once_value(builder, _NULL)
    count = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
    with builder.if_then(_ok(builder, status)):
        builder.store(driver.call(builder, "cuStreamGetCaptureInfo_v3",
                                  [stream, state, ident, graph, deps, edges, count]), status)
        with builder.if_then(_ok(builder, status)):
            value = builder.load(state)
            with builder.if_then(builder.icmp_signed(
                    "==", value, ir.Constant(_i32, _CAPTURE_STATUS_INVALIDATED)), likely=False):
                _refuse(builder, status, reason, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                        REASON_INVALIDATED)
            with builder.if_then(builder.icmp_signed(
                    "!=", value, ir.Constant(_i32, _CAPTURE_STATUS_ACTIVE)), likely=False):
                with builder.if_then(_ok(builder, status)):
                    _refuse(builder, status, reason, CUDA_ERROR_ILLEGAL_STATE,
                            REASON_NOT_CAPTURING)
    return graph, deps, edges, count


def _stream_context(builder, stream, status):
    """A slot holding the context of *stream*, the one its kernels run in
    (``cuStreamGetCtx``; a thread with no current context gets device 0's
    primary context first), emitted while *status* holds 0: handles and
    nodes belong to the context of the graph being recorded, whatever
    context is current (docs/devices.md)."""
    ctx = cgutils.alloca_once_value(builder, _NULL)
    with builder.if_then(_ok(builder, status)):
        builder.store(emit_with_context(
            builder, lambda: driver.call(builder, "cuStreamGetCtx", [stream, ctx])), status)
    return ctx


def emit_handle_create(builder, stream, default, flags):
    """``cuGraphConditionalHandleCreate`` in the graph *stream* is recording,
    for *stream*'s context, with ``unsigned`` *default* and *flags* (0 or
    :data:`ASSIGN_DEFAULT`). Returns ``(status, reason, handle)``, the
    handle an ``i64`` (0 on failure)."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    handle = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
    _check_driver(builder, status, reason, ir.Constant(_i32, driver_needed(COND_WHILE, 1)))
    graph = _capture_info(builder, stream, status, reason)[0]
    ctx = _stream_context(builder, stream, status)
    with builder.if_then(_ok(builder, status)):
        builder.store(driver.call(builder, "cuGraphConditionalHandleCreate", [
            handle, builder.load(graph), builder.load(ctx), default, flags]), status)
    failed = builder.not_(_ok(builder, status))
    return (builder.load(status), builder.load(reason),
            builder.select(failed, ir.Constant(_i64, 0), builder.load(handle)))


def emit_add_conditional(builder, stream, handle, kind, size):
    """Append a conditional node (``i32`` *kind*, ``i32`` *size* bodies,
    conditional handle ``i64`` *handle*) to the recording on *stream*: added
    to the graph after the recording's current dependencies
    (``cuGraphAddNode_v2``), which it then replaces
    (``cuStreamUpdateCaptureDependencies_v2``), so work submitted to
    *stream* later runs after the node. Returns ``(status, reason, node,
    bodies, graph)``: the ``CUgraphNode``, the driver's array of its *size*
    body graphs (``CUgraph*``, valid while the node is) and the graph the
    node is in, NULL on failure."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    node = cgutils.alloca_once_value(builder, _NULL)
    needed = builder.select(
        builder.or_(builder.icmp_signed("==", kind, ir.Constant(_i32, COND_SWITCH)),
                    builder.icmp_signed(">", size, ir.Constant(_i32, 1))),
        ir.Constant(_i32, driver_needed(COND_SWITCH, 1)),
        ir.Constant(_i32, driver_needed(COND_WHILE, 1)))
    _check_driver(builder, status, reason, needed)
    graph, deps, edges, count = _capture_info(builder, stream, status, reason)
    ctx = _stream_context(builder, stream, status)
    ty = node_params_type()
    params = cgutils.alloca_once(builder, ty)
    builder.store(ir.Constant(ty, None), params)
    for index, value in ((0, ir.Constant(_i32, NODE_TYPE_CONDITIONAL)), (2, handle), (3, kind),
                         (4, size)):
        builder.store(value, cgutils.gep_inbounds(builder, params, 0, index))
    with builder.if_then(_ok(builder, status)):
        builder.store(builder.load(ctx), cgutils.gep_inbounds(builder, params, 0, 6))
        builder.store(driver.call(builder, "cuGraphAddNode_v2", [
            node, builder.load(graph), builder.load(deps), builder.load(edges),
            builder.load(count), builder.bitcast(params, _i8p)]), status)
    with builder.if_then(_ok(builder, status)):
        builder.store(driver.call(builder, "cuStreamUpdateCaptureDependencies_v2", [
            stream, node, _NULL, ir.Constant(_i64, 1),
            ir.Constant(_i32, SET_CAPTURE_DEPENDENCIES)]), status)
    # The outermost graph belongs to the stream's device (a body's nodes
    # make it one of conditional nodes already): its replays are checked.
    with builder.if_then(builder.and_(_ok(builder, status), builder.not_(
            bodies.emit_records_body(builder, stream)))):
        asked, device = emit_context_device(builder, builder.load(ctx))
        with builder.if_then(builder.icmp_signed("==", asked, ir.Constant(_i32, 0))):
            graphdevices.emit_note(builder, builder.load(graph), device)
    bodies_out = builder.load(cgutils.gep_inbounds(builder, params, 0, 5))
    # its recording does not end while a WHILE node's body is empty
    with builder.if_then(builder.and_(_ok(builder, status), builder.icmp_signed(
            "==", kind, ir.Constant(_i32, COND_WHILE)))):
        bodies.emit_note_while(builder, builder.load(builder.bitcast(
            bodies_out, _i8p.as_pointer())), builder.load(graph))
    failed = builder.not_(_ok(builder, status))
    return (builder.load(status), builder.load(reason),
            builder.select(failed, _NULL, builder.load(node)),
            builder.select(failed, _NULL, bodies_out),
            builder.select(failed, _NULL, builder.load(graph)))


def emit_begin_body(builder, stream, bodies_array, index, mode, parent):
    """``cuStreamBeginCaptureToGraph``: *stream* records into body graph
    *index* (``i32``) of the driver's array *bodies_array* (``CUgraph*``) of
    a node of graph *parent*, until its capture ends, in capture *mode*
    (``i32``); the table of :mod:`.bodies` knows it meanwhile. Returns
    ``(status, reason)``. Refused before the driver is asked: a stream
    already capturing (``CUDA_ERROR_ILLEGAL_STATE``), a body recorded
    already (``CUDA_ERROR_ILLEGAL_STATE``, :data:`REASON_BODY_RECORDED`: a
    second recording's launches would run unordered with the first's), a
    full table (``CUDA_ERROR_OUT_OF_MEMORY``)."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, CUDA_ERROR_ILLEGAL_STATE))
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    graphs = builder.bitcast(bodies_array, _i8p.as_pointer())
    body = builder.load(builder.gep(graphs, [index], inbounds=True))
    with builder.if_then(builder.not_(emit_is_capturing(builder, stream)), likely=True):
        recorded = builder.icmp_signed(">", emit_node_count(builder, body),
                                       ir.Constant(_i64, 0))
        with builder.if_else(recorded, likely=False) as (again, first):
            with again:
                builder.store(ir.Constant(_i32, REASON_BODY_RECORDED), reason)
            with first:
                _claim_and_begin(builder, stream, body, mode, parent, status)
    return builder.load(status), builder.load(reason)


def _claim_and_begin(builder, stream, body, mode, parent, status):
    slot = bodies.emit_claim(builder, stream)
    with builder.if_else(builder.icmp_signed("<", slot, ir.Constant(_i32, 0))) as (
            full, claimed):
        with full:
            builder.store(ir.Constant(_i32, CUDA_ERROR_OUT_OF_MEMORY), status)
        with claimed:
            builder.store(driver.call(builder, "cuStreamBeginCaptureToGraph", [
                stream, body, ir.Constant(_i8p.as_pointer(), None), _NULL,
                ir.Constant(_i64, 0), mode]), status)
            with builder.if_else(_ok(builder, status)) as (begun, refused):
                with begun:
                    bodies.emit_record(builder, slot, body, parent)
                with refused:
                    bodies.emit_release(builder, stream)
