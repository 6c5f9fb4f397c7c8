"""CUDA graphs at run time: the driver calls behind stream capture, graph
instantiation, replay and update, emitted for compiled code.

Each emitter returns the ``CUresult`` (``i32``, 0 on success) and, where the
driver hands one back, the handle (``i8*``, NULL on failure); the only state
kept is the device of graphs with conditional nodes (:mod:`.graphdevices`),
whose replays on another device's stream are refused. The nopython surface
is :mod:`numba_cuda_launch.launch.graph` (docs/graphs.md, docs/devices.md).
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.errors import (CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_CONTEXT,
                                      CUDA_ERROR_INVALID_VALUE,
                                      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
                                      CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
                                      CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD)
from numba_cuda_launch.cudadrv import bodies, driver, graphdevices
from numba_cuda_launch.cudadrv.driver import emit_in_context, emit_launch_device, \
    emit_with_context

__all__ = [
    "CAPTURE_GLOBAL", "CAPTURE_THREAD_LOCAL", "CAPTURE_RELAXED",
    "NODE_OK", "NODE_NOT_CAPTURING", "NODE_NOT_ONE", "NODE_NOT_KERNEL",
    "LAUNCH_WHILE_LIMIT", "LAUNCH_OTHER_DEVICE",
    "END_NOT_CAPTURING", "END_BODY_OPEN", "END_RECORDS_BODY", "END_RECORDS_GRAPH",
    "END_WHILE_EMPTY",
    "UPDATE_RESULTS", "kernel_node_params_type",
    "emit_begin_capture", "emit_end_capture", "emit_end_body", "emit_abort_capture",
    "emit_node_count",
    "emit_last_node", "emit_instantiate", "emit_graph_launch",
    "emit_exec_update", "emit_kernel_node_set_params", "emit_kernel_node_attribute",
    "emit_graph_destroy", "emit_exec_destroy",
]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_NULL = ir.Constant(_i8p, None)

#: CUstreamCaptureMode
CAPTURE_GLOBAL, CAPTURE_THREAD_LOCAL, CAPTURE_RELAXED = 0, 1, 2
_CAPTURE_STATUS_NONE, _CAPTURE_STATUS_ACTIVE = 0, 1
_NODE_TYPE_KERNEL = 0

#: Why :func:`emit_last_node` found no kernel node (0: it did).
NODE_OK, NODE_NOT_CAPTURING, NODE_NOT_ONE, NODE_NOT_KERNEL = 0, 1, 2, 3
#: Why a graph launch failed, where known (0: the status says it all): a
#: simulated WHILE node at its iteration limit; a graph with conditional
#: nodes launched on a stream of another device than its own.
LAUNCH_WHILE_LIMIT, LAUNCH_OTHER_DEVICE = 1, 2

#: Why the end of a recording was refused (0: the status says it all): no
#: recording; a body of one of its nodes still being recorded; a body's
#: recording ended as a graph's (end_capture); a graph's ended as a body's
#: (end_body); a WHILE node of it with an empty body.
(END_NOT_CAPTURING, END_BODY_OPEN, END_RECORDS_BODY, END_RECORDS_GRAPH,
 END_WHILE_EMPTY) = 1, 2, 3, 4, 5

#: CUgraphExecUpdateResult values, as the driver names them.
UPDATE_RESULTS = {
    1: "the graph could not be applied (CU_GRAPH_EXEC_UPDATE_ERROR)",
    2: "its topology differs from the instantiated graph's (nodes or dependencies "
       "added, removed or reordered)",
    3: "a node changed type",
    4: "a kernel node launches another function",
    5: "parameters changed in a way the update cannot apply",
    6: "something changed that cannot be updated",
    7: "a kernel node's function changed in a way that cannot be updated",
    8: "node attributes changed in a way that cannot be updated",
}


def _ok(builder, status_slot):
    return builder.icmp_signed("==", builder.load(status_slot), ir.Constant(_i32, 0))


def emit_begin_capture(builder, stream, mode):
    """``cuStreamBeginCapture_v2(stream, mode)`` in the current context (a
    thread without one gets device 0's primary context first). A stream
    that begins a capture records no body (a table entry left by a body
    recording ended some other way is dropped)."""
    status = emit_with_context(
        builder, lambda: driver.call(builder, "cuStreamBeginCapture_v2", [stream, mode]))
    with builder.if_then(builder.icmp_signed("==", status, ir.Constant(_i32, 0))):
        bodies.emit_release(builder, stream)
    return status


def _capture_info(builder, stream):
    """``cuStreamGetCaptureInfo_v2`` of *stream*: ``(status, state, graph,
    deps, count)``, the status an ``i32`` and the others the slots the
    driver filled (capture status, graph recorded into, its current
    dependencies and their count)."""
    state = cgutils.alloca_once_value(builder, ir.Constant(_i32, _CAPTURE_STATUS_NONE))
    ident = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
    graph = cgutils.alloca_once_value(builder, _NULL)
    deps = cgutils.alloca_once_value(builder, ir.Constant(_i8p.as_pointer(), None))
    count = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
    status = driver.call(builder, "cuStreamGetCaptureInfo_v2",
                         [stream, state, ident, graph, deps, count])
    return status, state, graph, deps, count


def _recording(builder, stream):
    """The graph *stream* records into, NULL when it records none."""
    status, _, graph, _, _ = _capture_info(builder, stream)
    return builder.select(builder.icmp_signed("==", status, ir.Constant(_i32, 0)),
                          builder.load(graph), _NULL)


def emit_node_count(builder, graph):
    """The number of nodes of *graph* (``i64``; ``cuGraphGetNodes``), -1
    when the driver does not answer."""
    count = cgutils.alloca_once_value(builder, ir.Constant(_i64, 0))
    status = driver.call(builder, "cuGraphGetNodes", [graph, ir.Constant(_i8p.as_pointer(),
                                                                          None), count])
    return builder.select(builder.icmp_signed("==", status, ir.Constant(_i32, 0)),
                          builder.load(count), ir.Constant(_i64, -1))


def _emit_clear(builder, graph):
    """Remove every node of *graph* (``cuGraphDestroyNode``, one at a time)."""
    count = emit_node_count(builder, graph)
    node = cgutils.alloca_once_value(builder, _NULL)
    one = cgutils.alloca_once_value(builder, ir.Constant(_i64, 1))
    with builder.if_then(builder.icmp_signed(">", count, ir.Constant(_i64, 0))):
        with cgutils.for_range(builder, count):
            builder.store(ir.Constant(_i64, 1), one)
            builder.store(_NULL, node)
            driver.call(builder, "cuGraphGetNodes", [graph, node, one])
            with builder.if_then(cgutils.is_not_null(builder, builder.load(node))):
                driver.call(builder, "cuGraphDestroyNode", [builder.load(node)])


def _emit_end(builder, stream, body, check_whiles=True):
    """End the recording on *stream*, a body's if *body* (a Python bool),
    else a graph's: ``(status, reason, graph)``, *reason* one of the
    ``END_*`` values (0: the status says it all). Refused before the driver
    (the recording goes on): a body's recording ended as a graph's or the
    other way round (``CUDA_ERROR_ILLEGAL_STATE``), one with a body of its
    nodes still being recorded (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``), and
    with *check_whiles*, one holding a WHILE node with an empty body
    (``CUDA_ERROR_INVALID_VALUE``)."""
    graph = cgutils.alloca_once_value(builder, _NULL)
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, CUDA_ERROR_ILLEGAL_STATE))
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))

    def refuse(code, why):
        builder.store(ir.Constant(_i32, code), status)
        builder.store(why if isinstance(why, ir.Value) else ir.Constant(_i32, why), reason)

    records_body = bodies.emit_records_body(builder, stream)
    with builder.if_else(records_body if not body else builder.not_(records_body),
                         likely=False) as (wrong, right):
        with wrong:
            if body:  # no body here: a graph's recording, or none
                refuse(CUDA_ERROR_ILLEGAL_STATE, builder.select(
                    emit_is_capturing(builder, stream), ir.Constant(_i32, END_RECORDS_GRAPH),
                    ir.Constant(_i32, END_NOT_CAPTURING)))
            else:  # a table entry of a body recording ended some other way is stale
                capturing = emit_is_capturing(builder, stream)
                refuse(CUDA_ERROR_ILLEGAL_STATE, builder.select(
                    capturing, ir.Constant(_i32, END_RECORDS_BODY),
                    ir.Constant(_i32, END_NOT_CAPTURING)))
                with builder.if_then(builder.not_(capturing)):
                    bodies.emit_release(builder, stream)
        with right:
            recording = _recording(builder, stream)
            open_ = bodies.emit_children_open(builder, recording,
                                              lambda s: emit_is_capturing(builder, s))
            empty = bodies.emit_empty_while(builder, recording, lambda g: emit_node_count(
                builder, g)) if check_whiles else cgutils.false_bit
            with builder.if_then(open_, likely=False):
                refuse(CUDA_ERROR_STREAM_CAPTURE_UNJOINED, END_BODY_OPEN)
            with builder.if_then(builder.and_(builder.not_(open_), empty), likely=False):
                refuse(CUDA_ERROR_INVALID_VALUE, END_WHILE_EMPTY)
            with builder.if_then(builder.not_(builder.or_(open_, empty)), likely=True):
                _emit_driver_end(builder, stream, recording, graph, status, reason)
    return builder.load(status), builder.load(reason), builder.load(graph)


def _emit_driver_end(builder, stream, recording, graph, status, reason):
    builder.store(driver.call(builder, "cuStreamEndCapture", [stream, graph]), status)
    ended = builder.load(status)
    with builder.if_then(builder.icmp_signed("==", ended, ir.Constant(
            _i32, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)), likely=False):
        graphdevices.emit_forget(builder, recording)  # the driver dropped it
    with builder.if_then(builder.icmp_signed("==", ended, ir.Constant(
            _i32, CUDA_ERROR_ILLEGAL_STATE)), likely=False):
        builder.store(ir.Constant(_i32, END_NOT_CAPTURING), reason)
    # the recording ended (unless the capture goes on elsewhere)
    with builder.if_then(builder.icmp_signed("!=", ended, ir.Constant(
            _i32, CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD))):
        bodies.emit_release(builder, stream)
        bodies.emit_forget_whiles(builder, recording)


def emit_end_capture(builder, stream):
    """``cuStreamEndCapture`` of a graph's recording (``begin_capture``);
    returns ``(status, reason, CUgraph)``. An invalidated capture ends too,
    with ``CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`` and a NULL graph. Not
    ended (the reason says why): a stream recording a body, a recording
    with a conditional node whose body is still being recorded on another
    stream (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``, :mod:`.bodies`), one
    with a WHILE node whose body is empty."""
    return _emit_end(builder, stream, False)


def emit_end_body(builder, stream):
    """End the recording of a conditional node's body on *stream*
    (``cuStreamEndCapture``): ``(status, reason)``, refused as
    :func:`emit_end_capture` refuses, and for a stream recording a graph
    (``END_RECORDS_GRAPH``) or nothing."""
    return _emit_end(builder, stream, True)[:2]


def _query_capturing(builder, stream):
    """``cuStreamIsCapturing``: ``(status slot, i1)``, the ``i1`` true when
    the query succeeded and *stream* is capturing."""
    state = cgutils.alloca_once_value(builder, ir.Constant(_i32, _CAPTURE_STATUS_NONE))
    status = cgutils.alloca_once_value(
        builder, driver.call(builder, "cuStreamIsCapturing", [stream, state]))
    return status, builder.and_(_ok(builder, status),
                                builder.icmp_signed("!=", builder.load(state),
                                                    ir.Constant(_i32, _CAPTURE_STATUS_NONE)))


def emit_is_capturing(builder, stream):
    """An ``i1``: *stream* is capturing (a failed query reads as not
    capturing: the caller's next driver call on it reports the error)."""
    return _query_capturing(builder, stream)[1]


def emit_exchange_capture_mode(builder, mode):
    """``cuThreadExchangeStreamCaptureMode(mode)``: *mode* (an ``i32*``)
    becomes this thread's capture mode and receives the previous one."""
    return driver.call(builder, "cuThreadExchangeStreamCaptureMode", [mode])


def emit_abort_capture(builder, stream):
    """End a capture in progress on *stream*, if any, and drop what it
    recorded: a graph's recording is destroyed, a body's nodes are removed
    (the body is empty again, to record anew). The way out after a failed
    operation left a stream recording. Returns 0 when the stream is not
    capturing (any more); ``CUDA_ERROR_STREAM_CAPTURE_UNJOINED`` while a
    body of one of its conditional nodes is being recorded (abort that
    body's stream first)."""
    status, capturing = _query_capturing(builder, stream)
    with builder.if_then(capturing):
        recording = _recording(builder, stream)
        with builder.if_else(bodies.emit_records_body(builder, stream)) as (body, plain):
            with body:
                ended, _, graph = _emit_end(builder, stream, True, check_whiles=False)
                _abort_result(builder, status, ended)
                with builder.if_then(_ok(builder, status)):
                    _emit_clear(builder, recording)
            with plain:
                ended, _, graph = _emit_end(builder, stream, False, check_whiles=False)
                _abort_result(builder, status, ended)
                with builder.if_then(cgutils.is_not_null(builder, graph)):
                    emit_graph_destroy(builder, graph)
    return builder.load(status)


def _abort_result(builder, status, ended):
    # An invalidated capture is ended all the same: that is success here.
    invalidated = builder.icmp_signed(
        "==", ended, ir.Constant(_i32, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED))
    builder.store(builder.select(invalidated, ir.Constant(_i32, 0), ended), status)


def emit_last_node(builder, stream):
    """The kernel node the last launch on capturing *stream* added: right
    after a launch, the capture's only dependency is that launch's node.
    Returns ``(status, reason, CUgraphNode)``; *reason* is one of the
    ``NODE_*`` values (the status is ``CUDA_ERROR_INVALID_VALUE`` when it is
    not ``NODE_OK``)."""
    asked, state, _, deps, count = _capture_info(builder, stream)
    status = cgutils.alloca_once_value(builder, asked)
    node = cgutils.alloca_once_value(builder, _NULL)
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, NODE_OK))
    invalid = ir.Constant(_i32, CUDA_ERROR_INVALID_VALUE)
    with builder.if_then(_ok(builder, status)):
        active = builder.icmp_signed("==", builder.load(state),
                                     ir.Constant(_i32, _CAPTURE_STATUS_ACTIVE))
        one = builder.icmp_signed("==", builder.load(count), ir.Constant(_i64, 1))
        with builder.if_else(builder.and_(active, one)) as (single, refused):
            with single:
                builder.store(builder.load(builder.load(deps)), node)
            with refused:
                builder.store(invalid, status)
                builder.store(builder.select(active, ir.Constant(_i32, NODE_NOT_ONE),
                                             ir.Constant(_i32, NODE_NOT_CAPTURING)), reason)
    with builder.if_then(_ok(builder, status)):
        kind = cgutils.alloca_once_value(builder, ir.Constant(_i32, -1))
        builder.store(driver.call(builder, "cuGraphNodeGetType", [builder.load(node), kind]),
                      status)
        not_kernel = builder.icmp_signed("!=", builder.load(kind),
                                         ir.Constant(_i32, _NODE_TYPE_KERNEL))
        with builder.if_then(builder.and_(_ok(builder, status), not_kernel)):
            builder.store(invalid, status)
            builder.store(ir.Constant(_i32, NODE_NOT_KERNEL), reason)
    failed = builder.icmp_signed("!=", builder.load(status), ir.Constant(_i32, 0))
    return builder.load(status), builder.load(reason), builder.select(
        failed, _NULL, builder.load(node))


def emit_instantiate(builder, graph):
    """``cuGraphInstantiateWithFlags`` (no flags); returns ``(status,
    CUgraphExec)``. The executable graph of a graph with conditional nodes
    takes its device."""
    exe = cgutils.alloca_once_value(builder, _NULL)
    status = emit_with_context(builder, lambda: driver.call(
        builder, "cuGraphInstantiateWithFlags", [exe, graph, ir.Constant(_i64, 0)]))
    with builder.if_then(builder.icmp_signed("==", status, ir.Constant(_i32, 0))):
        device = graphdevices.emit_device_of(builder, graph)
        with builder.if_else(builder.icmp_signed(">=", device, ir.Constant(_i32, 0))) as (
                noted, plain):
            with noted:
                graphdevices.emit_note(builder, builder.load(exe), device)
            with plain:  # a handle the driver gives again is not its old graph's
                graphdevices.emit_forget(builder, builder.load(exe))
    return status, builder.load(exe)


def emit_graph_launch(builder, exe, stream):
    """``cuGraphLaunch(exe, stream)``; a thread with no current context gets
    device 0's primary context and launches again (as kernel launches do).
    Returns ``(status, reason)``: the reason :data:`LAUNCH_OTHER_DEVICE`
    with ``CUDA_ERROR_INVALID_CONTEXT`` when *exe* has conditional nodes of
    another device than *stream*'s, refused before the driver, else 0 (the
    simulator's launches have one, :data:`LAUNCH_WHILE_LIMIT`)."""
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    own = graphdevices.emit_device_of(builder, exe)
    with builder.if_then(builder.icmp_signed(">=", own, ir.Constant(_i32, 0)), likely=False):
        asked, device = emit_launch_device(builder, stream)
        # a failed query (no current context for a default stream) is no answer
        with builder.if_then(builder.and_(
                builder.icmp_signed("==", asked, ir.Constant(_i32, 0)),
                builder.icmp_signed("!=", device, own))):
            builder.store(ir.Constant(_i32, CUDA_ERROR_INVALID_CONTEXT), status)
            builder.store(ir.Constant(_i32, LAUNCH_OTHER_DEVICE), reason)
    with builder.if_then(builder.icmp_signed("==", builder.load(reason), ir.Constant(_i32, 0)),
                         likely=True):
        builder.store(emit_in_context(builder, lambda: driver.call(
            builder, "cuGraphLaunch", [exe, stream])), status)
    return builder.load(status), builder.load(reason)


# CUgraphExecUpdateResultInfo: result (i32), errorNode, errorFromNode.
_UPDATE_INFO = ir.LiteralStructType([_i32, _i8p, _i8p])


def emit_exec_update(builder, exe, graph):
    """``cuGraphExecUpdate_v2``: apply *graph*'s parameters to *exe* (same
    topology); returns ``(status, result)``, *result* the driver's
    ``CUgraphExecUpdateResult`` (0 on success, a key of ``UPDATE_RESULTS``
    otherwise)."""
    info = cgutils.alloca_once(builder, _UPDATE_INFO)
    builder.store(ir.Constant(_UPDATE_INFO, None), info)
    status = emit_with_context(builder, lambda: driver.call(
        builder, "cuGraphExecUpdate_v2", [exe, graph, builder.bitcast(info, _i8p)]))
    return status, builder.load(cgutils.gep_inbounds(builder, info, 0, 0))


def kernel_node_params_type():
    """``CUDA_KERNEL_NODE_PARAMS_v2``: func, grid x/y/z, block x/y/z,
    sharedMemBytes, kernelParams, extra, kern, ctx (72 bytes)."""
    return ir.LiteralStructType([_i8p] + [_i32] * 7 + [_i8p.as_pointer()] * 2 + [_i8p] * 2)


def emit_kernel_node_set_params(builder, exe, node, func, dims, sharedmem, params):
    """``cuGraphExecKernelNodeSetParams_v2``: set the function, the six
    dimensions (grid x, y, z, block x, y, z), dynamic shared memory and
    parameters (``void**``) of kernel node *node* in *exe*. The parameter
    values are copied by the driver during the call."""
    ty = kernel_node_params_type()
    struct = cgutils.alloca_once(builder, ty)
    values = [func] + list(dims) + [sharedmem, params,
                                    ir.Constant(_i8p.as_pointer(), None), _NULL, _NULL]
    for i, v in enumerate(values):
        builder.store(v, cgutils.gep_inbounds(builder, struct, 0, i))
    return driver.call(builder, "cuGraphExecKernelNodeSetParams_v2",
                       [exe, node, builder.bitcast(struct, _i8p)])


# CUkernelNodeAttrValue: a 64-byte union (eight 8-byte words, as launchex's).
_ATTR_VALUE = ir.ArrayType(_i64, 8)


def emit_kernel_node_attribute(builder, node, attr, count):
    """``cuGraphKernelNodeGetAttribute(node, attr)``: ``(status, values)``,
    the first *count* ``unsigned`` of the value (``ATTRIBUTE_COOPERATIVE``:
    one, nonzero when the recorded launch was cooperative;
    ``ATTRIBUTE_CLUSTER_DIMENSION``: x, y, z, zero when it had no cluster)."""
    value = cgutils.alloca_once_value(builder, ir.Constant(_ATTR_VALUE, None))
    status = driver.call(builder, "cuGraphKernelNodeGetAttribute",
                         [node, ir.Constant(_i32, attr), builder.bitcast(value, _i8p)])
    words = builder.bitcast(value, _i32.as_pointer())
    return status, [builder.load(builder.gep(words, [ir.Constant(_i32, i)], inbounds=True))
                    for i in range(count)]


def emit_graph_destroy(builder, graph):
    graphdevices.emit_forget(builder, graph)
    return driver.call(builder, "cuGraphDestroy", [graph])


def emit_exec_destroy(builder, exe):
    graphdevices.emit_forget(builder, exe)
    return driver.call(builder, "cuGraphExecDestroy", [exe])
