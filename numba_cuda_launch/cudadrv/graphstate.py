"""The CUDA driver's graph bookkeeping, in Python: stream captures, graphs,
executable graphs and kernel nodes, with the ``CUresult`` the driver gives
each misuse. The recording driver (:mod:`.recording`) and the simulator's
graphs (:mod:`numba_cuda_launch.launch.backends.simgraph`) both keep their
graphs here, so they answer alike (docs/graphs.md, "Testing without a GPU").
"""

import threading
from dataclasses import dataclass, field

from numba_cuda_launch.errors import (
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
    CUDA_ERROR_ILLEGAL_STATE,
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
)
from numba_cuda_launch.cudadrv.graph import CAPTURE_RELAXED

__all__ = ["Capture", "RecordedGraph", "RecordedExec", "GraphState"]

# CUgraphExecUpdateResult values
_TOPOLOGY_CHANGED, _NODE_TYPE_CHANGED, _FUNCTION_CHANGED = 2, 3, 4


@dataclass
class Capture:
    mode: int
    thread: int
    by_node: dict = field(default_factory=dict)  # node handle -> launch, in capture order
    invalidated: bool = False


@dataclass
class RecordedGraph:
    """A graph recorded by a stream capture: ``by_node`` maps node handles to
    launches in capture order (``nodes`` and ``launches`` list them)."""

    handle: int
    by_node: dict
    mode: int
    destroyed: bool = False

    @property
    def nodes(self):
        return list(self.by_node)

    @property
    def launches(self):
        return list(self.by_node.values())


@dataclass
class RecordedExec:
    """An executable graph: the launches a replay runs (``launches``, by
    node, updates applied) and the graph it was instantiated from."""

    handle: int
    graph: int
    launches: dict  # node -> launch
    destroyed: bool = False

    @property
    def nodes(self):
        return list(self.launches)


def _no_change(launch, old=None):
    return launch


def _update_result(new, old):
    """The ``CUgraphExecUpdateResult`` of replacing launches *old* by *new*
    node by node (0: the update is allowed)."""
    if len(new) != len(old):
        return _TOPOLOGY_CHANGED
    for n, o in zip(new, old):
        if type(n) is not type(o):
            return _NODE_TYPE_CHANGED
        if n.kernel != o.kernel:
            return _FUNCTION_CHANGED
    return 0


class GraphState:
    """Captures by stream handle, graphs and executable graphs by handles
    never reused. *keep_destroyed*: destroyed records stay, marked
    ``destroyed`` (else they and what they hold are dropped). *own(launch)*
    is an executable graph's copy of a recorded launch; *update(new, old)*
    what a node runs after ``cuGraphExecUpdate`` replaced *old* by *new*."""

    def __init__(self, keep_destroyed=False, own=_no_change, update=_no_change):
        self.lock = threading.Lock()
        self.captures = {}  # stream handle -> Capture
        self.graphs = {}    # handle -> RecordedGraph
        self.execs = {}     # handle -> RecordedExec
        self._keep_destroyed = keep_destroyed
        self._own = own
        self._update = update
        self._next = 0

    def _handle(self, base):
        self._next += 1
        return base + 16 * self._next

    @staticmethod
    def _live(table, handle):
        value = table.get(handle)
        return None if value is None or value.destroyed else value

    def live(self):
        """The handles of the graphs and executable graphs not destroyed."""
        with self.lock:
            return ([h for h, g in self.graphs.items() if not g.destroyed]
                    + [h for h, e in self.execs.items() if not e.destroyed])

    @property
    def nodes(self):
        """The kernel nodes of the graphs not destroyed: node -> graph handle."""
        with self.lock:
            return {node: h for h, g in self.graphs.items() if not g.destroyed
                    for node in g.by_node}

    def record(self, stream, launch):
        """A launch on *stream*: recorded as a new node if the stream is
        capturing (the ``CUresult``); None when it is to run now."""
        with self.lock:
            capture = self.captures.get(stream)
            if capture is not None:
                if capture.invalidated:
                    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
                capture.by_node[self._handle(0x70000000)] = launch
                return 0
            if stream == 0 and self.captures:
                # The legacy stream waits for every blocking stream: one
                # that is capturing cannot be waited for.
                for c in self.captures.values():
                    c.invalidated = True
                return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
        return None

    def node_launch(self, node):
        """The launch kernel node *node* recorded (in a graph or a capture), or None."""
        with self.lock:
            for owner in list(self.graphs.values()) + list(self.captures.values()):
                if node in owner.by_node:
                    return owner.by_node[node]
        return None

    def begin_capture(self, stream, mode):
        if stream == 0:
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
        with self.lock:
            if stream in self.captures:
                return CUDA_ERROR_ILLEGAL_STATE
            self.captures[stream] = Capture(mode, threading.get_ident())
        return 0

    def _end(self, stream):
        capture = self.captures.get(stream)
        if capture is None:
            return CUDA_ERROR_ILLEGAL_STATE, None
        if capture.mode != CAPTURE_RELAXED and capture.thread != threading.get_ident():
            return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, None
        del self.captures[stream]
        return 0, capture

    def end_capture(self, stream):
        """``(status, graph handle)``, the handle 0 on failure."""
        with self.lock:
            status, capture = self._end(stream)
            if status:
                return status, 0
            if capture.invalidated:
                return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0
            handle = self._handle(0x60000000)
            self.graphs[handle] = RecordedGraph(handle, capture.by_node, capture.mode)
        return 0, handle

    def abort_capture(self, stream):
        """End the capture on *stream*, if any, dropping what it recorded."""
        with self.lock:
            if stream not in self.captures:
                return 0
            return self._end(stream)[0]

    def instantiate(self, graph):
        """``(status, executable graph handle)``, the handle 0 on failure."""
        with self.lock:
            g = self._live(self.graphs, graph)
            if g is None:
                return CUDA_ERROR_INVALID_VALUE, 0
            handle = self._handle(0x68000000)
            self.execs[handle] = RecordedExec(handle, graph, {
                node: self._own(launch) for node, launch in g.by_node.items()})
        return 0, handle

    def exec_launches(self, exe):
        """What a replay of *exe* runs, in node order; None if *exe* is not live."""
        with self.lock:
            e = self._live(self.execs, exe)
            return None if e is None else tuple(e.launches.values())

    def _exec_node(self, exe, node):
        e = self._live(self.execs, exe)
        # A node belongs to its graph: dropping the graph's record drops it
        # (a record kept after destroy does not: the driver would not notice).
        if e is None or e.graph not in self.graphs:
            return None
        return e.launches.get(node)

    def exec_node(self, exe, node):
        """What kernel node *node* of executable graph *exe* runs, or None."""
        with self.lock:
            return self._exec_node(exe, node)

    def set_node(self, exe, node, make_launch):
        """``cuGraphExecKernelNodeSetParams``: kernel node *node* of *exe* runs
        ``make_launch(old)``, *old* what it ran; ``(status, the launch set)``."""
        with self.lock:
            old = self._exec_node(exe, node)
            if old is None:
                return CUDA_ERROR_INVALID_VALUE, None
            new = self.execs[exe].launches[node] = make_launch(old)
        return 0, new

    def exec_update(self, exe, graph):
        """``cuGraphExecUpdate``: ``(status, CUgraphExecUpdateResult)``."""
        with self.lock:
            e, g = self._live(self.execs, exe), self._live(self.graphs, graph)
            if e is None or g is None:
                return CUDA_ERROR_INVALID_VALUE, 0
            result = _update_result(list(g.by_node.values()), list(e.launches.values()))
            if result:
                return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result
            for node, new in zip(list(e.launches), g.by_node.values()):
                e.launches[node] = self._update(new, e.launches[node])
        return 0, 0

    def destroy(self, table, handle):
        """``cuGraphDestroy``/``cuGraphExecDestroy`` of *handle* in *table*
        (:attr:`graphs` or :attr:`execs`)."""
        with self.lock:
            if self._live(table, handle) is None:
                return CUDA_ERROR_INVALID_VALUE
            if self._keep_destroyed:
                table[handle].destroyed = True
            else:
                del table[handle]
        return 0
