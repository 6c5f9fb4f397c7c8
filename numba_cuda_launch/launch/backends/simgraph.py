"""CUDA graphs under numba-cuda's CUDA simulator: a launch on a capturing
stream is recorded instead of run, an executable graph replays the records
in order, its conditional nodes as the GPU runs them (IF once or not, a
SWITCH case, a WHILE body until a kernel sets its condition to 0, at most
:func:`while_limit` times). The bookkeeping and its ``CUresult`` values are the recording
driver's (:mod:`numba_cuda_launch.cudadrv.graphstate`); compiled code reaches
it through one object-mode helper (:class:`Emitters`, standing in for
:mod:`numba_cuda_launch.cudadrv.graph`). docs/graphs.md, "Under numba-cuda's simulator".
"""

import os
import threading
from dataclasses import dataclass

import numba
from llvmlite import ir
from numba.core import types

from numba_cuda_launch.errors import (CUDA_ERROR_ILLEGAL_STATE, CUDA_ERROR_INVALID_VALUE,
                                      CUDA_ERROR_LAUNCH_TIMEOUT,
                                      CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
from numba_cuda_launch.launch.refusals import call_jitted
from numba_cuda_launch.cudadrv.conditional import (
    COND_WHILE, REASON_BODY_RECORDED, REASON_INVALIDATED, REASON_NOT_CAPTURING)
from numba_cuda_launch.cudadrv.graph import (
    LAUNCH_WHILE_LIMIT, NODE_NOT_CAPTURING, NODE_NOT_KERNEL, NODE_NOT_ONE, NODE_OK)
from numba_cuda_launch.cudadrv.graphstate import ExecConditional, GraphState

__all__ = ["KernelLaunch", "STATE", "Emitters", "set_conditional", "while_limit",
           "WHILE_LIMIT_VARIABLE", "SIMULATED_CONTEXT"]

#: The environment variable bounding a simulated WHILE node's iterations.
WHILE_LIMIT_VARIABLE = "NUMBA_CUDA_LAUNCH_SIM_WHILE_LIMIT"
_DEFAULT_WHILE_LIMIT = 100_000
#: The one context of the simulator (conditional handles record it).
SIMULATED_CONTEXT = 0xC0


def while_limit():
    """How many times a simulated WHILE node may run its body in one
    launch: ``NUMBA_CUDA_LAUNCH_SIM_WHILE_LIMIT`` (read at each launch),
    100000 by default. A loop still going at the limit fails the launch
    (``CUDA_ERROR_LAUNCH_TIMEOUT``): on a GPU it would spin until a kernel
    sets its condition to 0, or forever."""
    text = os.environ.get(WHILE_LIMIT_VARIABLE)
    if text is None:
        return _DEFAULT_WHILE_LIMIT
    try:
        limit = int(text)
    except ValueError:
        limit = -1
    if limit < 1:
        raise ValueError("%s must be a positive integer (iterations of a simulated WHILE "
                         "node), not %r" % (WHILE_LIMIT_VARIABLE, text))
    return limit


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class KernelLaunch:
    """One simulated launch: the kernel, its configuration and its
    arguments as the simulator takes them (arrays viewing the same host
    memory, pointers as ctypes pointers, scalars by value). *run* is the
    simulator's ``run(launch, catch)`` (``CUresult``)."""

    kernel: object
    grid: tuple
    block: tuple
    sharedmem: int
    args: tuple
    run: object

    def replay(self):
        return self.run(self, True)


@dataclass(frozen=True, eq=False)  # holds arrays: compared by identity
class _ChildGraph:
    """The launches of an executable graph replayed on a capturing stream:
    one node of the graph being recorded, not a kernel node."""

    launches: tuple
    record: object  # the executable graph's RecordedExec: its conditions
    kernel = None  # what an executable graph update compares: none here

    def replay(self):
        return _replay(self.launches, self.record)[0]


# The executable graphs being replayed, innermost last: whose conditional
# handles kernels may set. One replay at a time (kernels run one at a time).
_running = []
_replay_lock = threading.RLock()


def set_conditional(handle, value):
    """``set_conditional`` in a simulated kernel: the condition *handle*
    takes *value* (an integer or a boolean; a value outside 0..2**32-1 is
    2**32-1, as on a GPU) in the replay that runs the kernel. A handle no
    running replay has is refused: a kernel sets a handle only while its
    graph runs it."""
    if isinstance(value, float) or not isinstance(int(value), int):
        raise TypeError("set_conditional(handle, value): value must be an integer or a "
                        "boolean, not %r" % (value,))
    value = int(value)
    value = value if 0 <= value < 1 << 32 else (1 << 32) - 1
    for record in reversed(_running):
        if handle in record.values:
            record.values[handle] = value
            return
    raise RuntimeError("set_conditional: conditional handle %#x is not being replayed: a "
                       "kernel sets a conditional handle only while a launch of the graph "
                       "it was made in runs the kernel" % handle)


def _run_nodes(launches, record):
    """Run *launches* in order, conditional nodes as the GPU does; the
    first failure stops the replay (as a fault stops a GPU's context):
    ``(status, reason)``."""
    for launch in launches:
        if isinstance(launch, ExecConditional):
            result = _run_conditional(launch, record)
        else:
            result = launch.replay(), 0
        if result[0]:
            return result
    return 0, 0


def _run_conditional(node, record):
    if node.kind != COND_WHILE:
        body = node.chosen(record.values[node.handle])
        return (0, 0) if body is None else _run_nodes(body.values(), record)
    limit, count = while_limit(), 0
    while record.values[node.handle]:
        if count == limit:
            return CUDA_ERROR_LAUNCH_TIMEOUT, LAUNCH_WHILE_LIMIT
        result = _run_nodes(node.bodies.get(0, {}).values(), record)
        if result[0]:
            return result
        count += 1
    return 0, 0


def _replay(launches, record):
    """One launch of executable graph *record* (a :class:`RecordedExec`),
    running *launches*: ``(status, reason)``."""
    with _replay_lock:
        record.start()
        _running.append(record)
        try:
            return _run_nodes(launches, record)
        finally:
            _running.pop()


def _begin_capture(stream, mode, *_):
    return STATE.begin_capture(stream, mode), 0, 0


def _end_capture(stream, body, *_):
    return STATE.end_recording(stream, bool(body))


def _abort_capture(stream, *_):
    return STATE.abort_capture(stream), 0, 0


def _last_node(stream, *_):
    with STATE.lock:
        capture = STATE.captures.get(stream)
        if capture is None or capture.invalidated:
            reason = NODE_NOT_CAPTURING
        elif not capture.by_node:
            reason = NODE_NOT_ONE
        else:
            node, launch = next(reversed(capture.by_node.items()))
            if isinstance(launch, KernelLaunch):
                return 0, NODE_OK, node
            reason = NODE_NOT_KERNEL
    return CUDA_ERROR_INVALID_VALUE, reason, 0


def _instantiate(graph, *_):
    status, exe = STATE.instantiate(graph)
    return status, 0, exe


def _graph_launch(exe, stream, *_):
    record = STATE.exec_record(exe)
    if record is None:
        return CUDA_ERROR_INVALID_VALUE, 0, 0
    launches = tuple(record.launches.values())
    status = STATE.record(stream, _ChildGraph(launches, record))
    return (_replay(launches, record) if status is None else (status, 0)) + (0,)


def _exec_update(exe, graph, *_):
    return STATE.exec_update(exe, graph) + (0,)


def _graph_destroy(graph, *_):
    return STATE.destroy(STATE.graphs, graph), 0, 0


def _exec_destroy(exe, *_):
    return STATE.destroy(STATE.execs, exe), 0, 0


def _capture_graph(stream):
    """``(status, reason, graph)``: the graph *stream* records, as the
    emitters of conditional nodes ask cuStreamGetCaptureInfo."""
    capture = STATE.capture_of(stream)
    if capture is None:
        return CUDA_ERROR_ILLEGAL_STATE, REASON_NOT_CAPTURING, 0
    if capture.invalidated:
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, REASON_INVALIDATED, 0
    return 0, 0, capture.graph


def _handle_create(stream, default, flags, *_):
    status, reason, graph = _capture_graph(stream)
    if status:
        return status, reason, 0
    status, handle = STATE.create_handle(graph, SIMULATED_CONTEXT, default, flags)
    return status, 0, handle


def _add_conditional(stream, handle, kind, size):
    status, reason, graph = _capture_graph(stream)
    if status:
        return status, reason, 0, 0, 0
    # the bodies are made as begin_body asks for them (a SWITCH may have 2**32-1)
    status, node, bodies = STATE.add_conditional(graph, SIMULATED_CONTEXT, handle, kind, size,
                                                 array=False)
    return status, 0, node, bodies, 0 if status else graph


def _is_capturing(stream, *_):
    return int(STATE.capture_of(stream) is not None), 0, 0


def _begin_body(stream, node, index, mode):
    body = STATE.body(node, index)
    if STATE.capture_of(stream) is None and STATE.nodes_of(body):
        # recorded already: a second recording would run unordered with it
        return CUDA_ERROR_ILLEGAL_STATE, REASON_BODY_RECORDED, 0
    return STATE.begin_capture_to_graph(stream, body, mode), 0, 0


#: The simulated driver's graph state, one per process (as the driver's).
STATE = GraphState()

# What compiled code asks for by number: (status, reason or result, handle[, handle]).
_OPERATIONS = (_begin_capture, _end_capture, _abort_capture, _last_node, _instantiate,
               _graph_launch, _exec_update, _graph_destroy, _exec_destroy, _handle_create,
               _add_conditional, _begin_body, _is_capturing)


_RESULT = types.UniTuple(types.int64, 5)


@numba.njit
def _operate(op, a, b, c, d):
    with numba.objmode(out=_RESULT):
        out = _OPERATIONS[op](a, b, c, d)
        out = tuple(out) + (0,) * (5 - len(out))
    return out


_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)


class Emitters:
    """The emitters of :mod:`numba_cuda_launch.cudadrv.graph` and
    :mod:`numba_cuda_launch.cudadrv.conditional` that the nopython graph
    functions use, with the same arguments and results, for code compiled
    under the simulator (in *context*)."""

    def __init__(self, context):
        self.context = context

    def _call(self, builder, op, *values):
        """``(status, reason, handle, handle, handle)`` of *op* (of
        :data:`_OPERATIONS`) on *values* (handles, ``i8*``, or integers)."""
        args = [ir.Constant(_i64, _OPERATIONS.index(op))]
        for v in values + (ir.Constant(_i64, 0),) * (4 - len(values)):
            if v.type == _i8p:
                v = builder.ptrtoint(v, _i64)
            elif v.type.width < 64:
                v = builder.zext(v, _i64)
            args.append(v)
        out = call_jitted(self.context, builder, _operate,
                          (types.int64,) + (types.uint64,) * 4, args)
        status, reason, *handles = (builder.extract_value(out, i) for i in range(5))
        return (builder.trunc(status, _i32), builder.trunc(reason, _i32),
                *(builder.inttoptr(h, _i8p) for h in handles))

    def emit_begin_capture(self, builder, stream, mode):
        return self._call(builder, _begin_capture, stream, mode)[0]

    def emit_end_capture(self, builder, stream):
        return self._call(builder, _end_capture, stream, ir.Constant(_i64, 0))[:3]

    def emit_end_body(self, builder, stream):
        return self._call(builder, _end_capture, stream, ir.Constant(_i64, 1))[:2]

    def emit_abort_capture(self, builder, stream):
        return self._call(builder, _abort_capture, stream)[0]

    def emit_last_node(self, builder, stream):
        return self._call(builder, _last_node, stream)[:3]

    def emit_instantiate(self, builder, graph):
        status, _, exe, _, _ = self._call(builder, _instantiate, graph)
        return status, exe

    def emit_graph_launch(self, builder, exe, stream):
        return self._call(builder, _graph_launch, exe, stream)[:2]

    def emit_exec_update(self, builder, exe, graph):
        return self._call(builder, _exec_update, exe, graph)[:2]

    def emit_graph_destroy(self, builder, graph):
        return self._call(builder, _graph_destroy, graph)[0]

    def emit_exec_destroy(self, builder, exe):
        return self._call(builder, _exec_destroy, exe)[0]

    def emit_is_capturing(self, builder, stream):
        # a launch given a conditional handle is refused on a stream
        # recording no graph, as the driver backend refuses it
        status = self._call(builder, _is_capturing, stream)[0]
        return builder.icmp_signed("!=", status, ir.Constant(_i32, 0))

    def emit_handle_create(self, builder, stream, default, flags):
        status, reason, handle, _, _ = self._call(builder, _handle_create, stream, default,
                                                  flags)
        return status, reason, builder.ptrtoint(handle, _i64)

    def emit_add_conditional(self, builder, stream, handle, kind, size):
        return self._call(builder, _add_conditional, stream, handle, kind, size)

    def emit_begin_body(self, builder, stream, bodies, index, mode, parent):
        # *bodies* is the node's handle (no array: bodies are made as asked for)
        return self._call(builder, _begin_body, stream, bodies, index, mode)[:2]
