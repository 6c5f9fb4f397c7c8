"""CUDA graphs under numba-cuda's CUDA simulator: a stream capture records
the simulated launches made on the stream instead of running them, an
executable graph replays them in order, updates replace them
(docs/graphs.md, "Under the simulator").

The driver's graph state is kept here in Python (:data:`STATE`): captures
by stream handle, graphs, executable graphs and kernel nodes by handles that
are never reused. Each misuse gets the ``CUresult`` the driver gives it (the
recording driver, :mod:`numba_cuda_launch.cudadrv.recording`, answers the
same), so code written for a GPU runs, and fails, the same way here.
Compiled code reaches the state through one object-mode helper (the GIL
taken, as simulated launches take it): :class:`Emitters` stands in for the
driver emitters of :mod:`numba_cuda_launch.cudadrv.graph`. Destroying a
graph or an executable graph drops its records, and with them the
arguments they held.
"""

import threading
from dataclasses import dataclass

import numba
from llvmlite import ir
from numba.core import types

from numba_cuda_launch.errors import (
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
    CUDA_ERROR_ILLEGAL_STATE,
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
)
from numba_cuda_launch.launch.backends import call_jitted
from numba_cuda_launch.launch.caching import record_driver_calls
from numba_cuda_launch.cudadrv.graph import (
    CAPTURE_RELAXED, NODE_NOT_CAPTURING, NODE_NOT_KERNEL, NODE_NOT_ONE, NODE_OK)

__all__ = ["KernelLaunch", "GraphState", "STATE", "Emitters"]

# CUgraphExecUpdateResult: what exe.update(graph) reports, as the driver.
_TOPOLOGY_CHANGED, _NODE_TYPE_CHANGED, _FUNCTION_CHANGED = 2, 3, 4


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

    def replay(self):
        return _replay(self.launches)


def _replay(launches):
    """Run *launches* in order; the first failure stops the replay (as a
    fault stops a GPU's context) and is its status."""
    for launch in launches:
        status = launch.replay()
        if status:
            return status
    return 0


class _Capture:
    def __init__(self, mode, thread):
        self.mode = mode
        self.thread = thread
        self.nodes = []     # node handles, in capture order
        self.launches = []  # what each node replays
        self.invalidated = False


@dataclass
class _Graph:
    nodes: list
    launches: list


@dataclass
class _Exec:
    graph: int          # the graph instantiated: its nodes name this one's
    launches: dict      # node handle -> what the replay runs


class GraphState:
    """Captures, graphs and executable graphs of the simulated driver."""

    def __init__(self):
        self._lock = threading.Lock()
        self._next = 0
        self.captures = {}  # stream handle -> _Capture
        self.graphs = {}    # handle -> _Graph
        self.execs = {}     # handle -> _Exec
        self.nodes = {}     # kernel node handle -> its graph's handle

    def _handle(self, base):
        self._next += 1
        return base + 16 * self._next

    def live(self):
        """The handles of the graphs and executable graphs not destroyed."""
        with self._lock:
            return sorted(self.graphs) + sorted(self.execs)

    # -- what a launch asks ---------------------------------------------------------

    def submit(self, stream, node):
        """Record *node* (a :class:`KernelLaunch`, or a :class:`_ChildGraph`)
        if *stream* is capturing: the ``CUresult``; None when it is to be
        run now."""
        with self._lock:
            capture = self.captures.get(stream)
            if capture is not None:
                if capture.invalidated:
                    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                capture.nodes.append(self._handle(0x70000000))
                capture.launches.append(node)
                return 0
            if stream == 0 and self.captures:
                # The legacy stream waits for every blocking stream (the
                # simulator's are): one that is capturing cannot be waited for.
                for c in self.captures.values():
                    c.invalidated = True
                return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
        return None

    def set_node(self, exe, node, launch):
        """``cuGraphExecKernelNodeSetParams``: the replay of kernel node
        *node* of *exe* runs *launch*. The node's graph must be alive (a
        node belongs to its graph)."""
        with self._lock:
            e = self.execs.get(exe)
            if e is None or self.nodes.get(node) != e.graph or node not in e.launches:
                return CUDA_ERROR_INVALID_VALUE
            e.launches[node] = launch
        return 0

    # -- the graph operations: (status, reason or result, handle) -------------------

    def begin_capture(self, stream, mode):
        if stream == 0:
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, 0, 0
        with self._lock:
            if stream in self.captures:
                return CUDA_ERROR_ILLEGAL_STATE, 0, 0
            self.captures[stream] = _Capture(mode, threading.get_ident())
        return 0, 0, 0

    def _end(self, stream):
        """End the capture on *stream*: ``(status, capture)``."""
        capture = self.captures.get(stream)
        if capture is None:
            return CUDA_ERROR_ILLEGAL_STATE, None
        if capture.mode != CAPTURE_RELAXED and capture.thread != threading.get_ident():
            return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, None
        del self.captures[stream]
        return 0, capture

    def end_capture(self, stream):
        with self._lock:
            status, capture = self._end(stream)
            if status:
                return status, 0, 0
            if capture.invalidated:
                return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0, 0
            handle = self._handle(0x60000000)
            self.graphs[handle] = _Graph(capture.nodes, capture.launches)
            self.nodes.update(dict.fromkeys(capture.nodes, handle))
        return 0, 0, handle

    def abort_capture(self, stream):
        with self._lock:
            if stream not in self.captures:
                return 0, 0, 0
            return self._end(stream)[0], 0, 0

    def last_node(self, stream):
        with self._lock:
            capture = self.captures.get(stream)
            if capture is None or capture.invalidated:
                reason = NODE_NOT_CAPTURING
            elif not capture.nodes:
                reason = NODE_NOT_ONE
            elif not isinstance(capture.launches[-1], KernelLaunch):
                reason = NODE_NOT_KERNEL
            else:
                return 0, NODE_OK, capture.nodes[-1]
        return CUDA_ERROR_INVALID_VALUE, reason, 0

    def instantiate(self, graph):
        with self._lock:
            g = self.graphs.get(graph)
            if g is None:
                return CUDA_ERROR_INVALID_VALUE, 0, 0
            handle = self._handle(0x68000000)
            self.execs[handle] = _Exec(graph, dict(zip(g.nodes, g.launches)))
        return 0, 0, handle

    def graph_launch(self, exe, stream):
        with self._lock:
            e = self.execs.get(exe)
            if e is None:
                return CUDA_ERROR_INVALID_VALUE, 0, 0
            launches = tuple(e.launches.values())  # in node order (insertion)
        status = self.submit(stream, _ChildGraph(launches))
        if status is None:
            status = _replay(launches)
        return status, 0, 0

    def exec_update(self, exe, graph):
        with self._lock:
            e, g = self.execs.get(exe), self.graphs.get(graph)
            if e is None or g is None:
                return CUDA_ERROR_INVALID_VALUE, 0, 0
            result = 0
            if len(g.launches) != len(e.launches):
                result = _TOPOLOGY_CHANGED
            else:
                for new, old in zip(g.launches, e.launches.values()):
                    if type(new) is not type(old):
                        result = result or _NODE_TYPE_CHANGED
                    elif isinstance(new, KernelLaunch) and new.kernel is not old.kernel:
                        result = result or _FUNCTION_CHANGED
            if result:
                return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result, 0
            e.launches = dict(zip(e.launches, g.launches))
        return 0, 0, 0

    def graph_destroy(self, graph):
        with self._lock:
            g = self.graphs.pop(graph, None)
            if g is None:
                return CUDA_ERROR_INVALID_VALUE, 0, 0
            for node in g.nodes:
                del self.nodes[node]
        return 0, 0, 0

    def exec_destroy(self, exe):
        with self._lock:
            if self.execs.pop(exe, None) is None:
                return CUDA_ERROR_INVALID_VALUE, 0, 0
        return 0, 0, 0


#: The simulated driver's graph state, one per process (as the driver's).
STATE = GraphState()

_OPERATIONS = ("begin_capture", "end_capture", "abort_capture", "last_node", "instantiate",
               "graph_launch", "exec_update", "graph_destroy", "exec_destroy")
_ARITY = {"begin_capture": 2, "graph_launch": 2, "exec_update": 2}


def _operate_in_python(op, a, b):
    name = _OPERATIONS[op]
    return getattr(STATE, name)(*(a, b)[:_ARITY.get(name, 1)])


_RESULT = types.UniTuple(types.int64, 3)


@numba.njit
def _operate(op, a, b):
    with numba.objmode(out=_RESULT):
        out = _operate_in_python(op, a, b)
    return out


_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)


class Emitters:
    """The emitters of :mod:`numba_cuda_launch.cudadrv.graph` that
    :mod:`numba_cuda_launch.launch.graph` uses, with the same arguments and
    results, for code compiled under the simulator (in *context*)."""

    def __init__(self, context):
        self.context = context

    def _call(self, builder, name, *values):
        """``(status, reason, handle)`` of operation *name* on *values*
        (handles, ``i8*``, or integers)."""
        # Code calling back into this process's Python state is never
        # reused from Numba's cache.
        record_driver_calls(self.context)
        args = [ir.Constant(_i64, _OPERATIONS.index(name))]
        for v in values + (ir.Constant(_i64, 0),) * (2 - len(values)):
            args.append(builder.ptrtoint(v, _i64) if v.type == _i8p else builder.zext(v, _i64)
                        if v.type.width < 64 else v)
        out = call_jitted(self.context, builder, _operate, (types.int64, types.uint64,
                                                            types.uint64), args)
        status, reason, handle = (builder.extract_value(out, i) for i in range(3))
        return builder.trunc(status, _i32), builder.trunc(reason, _i32), \
            builder.inttoptr(handle, _i8p)

    def emit_begin_capture(self, builder, stream, mode):
        return self._call(builder, "begin_capture", stream, mode)[0]

    def emit_end_capture(self, builder, stream):
        status, _, graph = self._call(builder, "end_capture", stream)
        return status, graph

    def emit_abort_capture(self, builder, stream):
        return self._call(builder, "abort_capture", stream)[0]

    def emit_last_node(self, builder, stream):
        return self._call(builder, "last_node", stream)

    def emit_instantiate(self, builder, graph):
        status, _, exe = self._call(builder, "instantiate", graph)
        return status, exe

    def emit_graph_launch(self, builder, exe, stream):
        return self._call(builder, "graph_launch", exe, stream)[0]

    def emit_exec_update(self, builder, exe, graph):
        return self._call(builder, "exec_update", exe, graph)[:2]

    def emit_graph_destroy(self, builder, graph):
        return self._call(builder, "graph_destroy", graph)[0]

    def emit_exec_destroy(self, builder, exe):
        return self._call(builder, "exec_destroy", exe)[0]
