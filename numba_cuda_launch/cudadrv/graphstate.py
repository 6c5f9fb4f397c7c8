"""The CUDA driver's graph bookkeeping, in Python: stream captures, graphs,
executable graphs, kernel nodes and conditional nodes (their handles, body
graphs and captures into bodies), with the ``CUresult`` the driver gives
each misuse. The recording driver (:mod:`.recording`) and the simulator's
graphs (:mod:`numba_cuda_launch.launch.backends.simgraph`) both keep their
graphs here, so they answer alike (docs/graphs.md, "Testing without a GPU").
"""

from __future__ import annotations

import ctypes
import itertools
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from numba_cuda_launch.errors import (
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE,
    CUDA_ERROR_ILLEGAL_STATE,
    CUDA_ERROR_INVALID_VALUE,
    CUDA_ERROR_NOT_SUPPORTED,
    CUDA_ERROR_OUT_OF_MEMORY,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,
    CUDA_ERROR_STREAM_CAPTURE_UNJOINED,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,
)
from numba_cuda_launch.cudadrv.conditional import ASSIGN_DEFAULT, COND_IF, COND_SWITCH, COND_WHILE
from numba_cuda_launch.cudadrv.graph import (CAPTURE_RELAXED, END_BODY_OPEN,
                                             END_NOT_CAPTURING, END_RECORDS_BODY,
                                             END_RECORDS_GRAPH, END_WHILE_EMPTY)

__all__ = ["Capture", "RecordedGraph", "RecordedExec", "ConditionalHandleRecord",
           "ConditionalNode", "ExecConditional", "GraphState", "LazyBodies", "ARRAY_BODIES"]

# CUgraphExecUpdateResult values
_TOPOLOGY_CHANGED, _NODE_TYPE_CHANGED, _FUNCTION_CHANGED = 2, 3, 4


@dataclass
class Capture:
    mode: int
    thread: int
    graph: int  # the graph it records into: its own, or a conditional node's body
    by_node: dict = field(default_factory=dict)  # node handle -> launch, in capture order
    invalidated: bool = False
    device: int = 0  # the device of the stream's context (what the caller says)


@dataclass
class RecordedGraph:
    """A graph recorded by a stream capture: ``by_node`` maps node handles to
    launches (or :class:`ConditionalNode` records) in capture order
    (``nodes`` and ``launches`` list them). A conditional node's body graph
    has ``body_of``, the node. ``device``: the device of the context it was
    recorded in (the capturing stream's, or the node's for a body)."""

    handle: int
    by_node: dict[int, Any]  # node handle -> recording.Launch or ConditionalNode
    mode: int
    destroyed: bool = False
    body_of: int = 0
    device: int = 0

    @property
    def nodes(self) -> list[int]:
        """The node handles, in capture order."""
        return list(self.by_node)

    @property
    def launches(self) -> list[Any]:
        """The launches (and conditional nodes), in capture order."""
        return list(self.by_node.values())


@dataclass
class ConditionalHandleRecord:
    """A conditional handle: the graph it was made in (a conditional node
    using it must be in that graph or in a body inside it), its default,
    whether the default is assigned at each launch, and its context."""

    graph: int
    default: int
    assign_default: bool
    context: int


class LazyBodies(Sequence):
    """The body graphs of a conditional node, made when first asked for
    (``bodies[i]``): a SWITCH node may have 2**32-1 of them."""

    def __init__(self, size: int, make: Any) -> None:
        self._size, self._make = size, make
        self.made: dict[int, int] = {}  # index -> body graph, in the order made

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: Any) -> Any:
        if not isinstance(index, int) or not 0 <= index < self._size:
            raise IndexError(index)
        if index not in self.made:
            self.made[index] = self._make()
        return self.made[index]

    def __iter__(self) -> Any:
        raise TypeError("iterate LazyBodies.made, the bodies made so far")


@dataclass(eq=False)
class ConditionalNode:
    """A conditional node of a graph: its ``kind`` (``COND_IF``, ...), its
    conditional ``handle`` and the handles of its body graphs (a tuple, or
    :class:`LazyBodies`)."""

    kind: int
    handle: int
    bodies: Any
    kernel = None  # what an executable graph update compares: none here

    @property
    def size(self) -> int:
        """The number of bodies."""
        return len(self.bodies)

    def existing(self) -> list[tuple[int, int]]:
        """``(index, body graph)`` of the bodies made so far, by index."""
        if isinstance(self.bodies, LazyBodies):
            return sorted(self.bodies.made.items())
        return list(enumerate(self.bodies))


@dataclass(eq=False)
class ExecConditional:
    """A conditional node of an executable graph: what each body runs
    (``bodies``: body index -> dict of node -> launch, as
    :attr:`RecordedExec.launches`; a body never recorded runs nothing) and
    its number of bodies (``size``)."""

    kind: int
    handle: int
    bodies: dict[int, dict[int, Any]]
    size: int
    kernel = None

    def chosen(self, value: int) -> dict[int, Any] | None:
        """The body (its launches) a node run with condition *value* runs
        once: IF its body (or ELSE body), SWITCH case *value*; None for none.
        A WHILE node runs its body while the value is not 0."""
        index = value if self.kind == COND_SWITCH else 0 if value else 1
        return self.bodies.get(index, {}) if index < self.size else None


@dataclass
class RecordedExec:
    """An executable graph: the launches a replay runs (``launches``, by
    node, updates applied; conditional nodes as :class:`ExecConditional`),
    the graph it was instantiated from and the values of its conditional
    handles (``values``; each launch first assigns the defaults of those
    that assign them). ``device``: its graph's, where its kernels run
    whatever stream launches it."""

    handle: int
    graph: int
    launches: dict[int, Any]  # node -> launch
    destroyed: bool = False
    handles: dict[int, ConditionalHandleRecord] = field(default_factory=dict)
    values: dict[int, int] = field(default_factory=dict)  # handle -> value
    device: int = 0

    @property
    def nodes(self) -> list[int]:
        """The node handles."""
        return list(self.launches)

    def start(self) -> None:
        """A launch begins: assign the defaults that are assigned at each."""
        for handle, record in self.handles.items():
            if record.assign_default:
                self.values[handle] = record.default


def _no_change(launch, old=None):
    return launch


def _update_result(new, old, body_launches):
    """The ``CUgraphExecUpdateResult`` of replacing launches *old* (an
    executable graph's) by *new* (a graph's) node by node, bodies of
    conditional nodes included (*body_launches(graph)*: a body's launches);
    0: the update is allowed."""
    if len(new) != len(old):
        return _TOPOLOGY_CHANGED
    for n, o in zip(new, old):
        if isinstance(n, ConditionalNode) != isinstance(o, ExecConditional) or (
                not isinstance(n, ConditionalNode) and type(n) is not type(o)):
            return _NODE_TYPE_CHANGED
        if isinstance(n, ConditionalNode):
            if n.kind != o.kind or n.size != o.size:
                return _NODE_TYPE_CHANGED
            graphs = dict(n.existing())
            for index in set(graphs) | set(o.bodies):
                result = _update_result(
                    body_launches(graphs[index]) if index in graphs else [],
                    list(o.bodies.get(index, {}).values()), body_launches)
                if result:
                    return result
        elif n.kernel != o.kernel:
            return _FUNCTION_CHANGED
    return 0


def _initial(handles):
    """The values of conditional *handles* before a graph's first launch:
    the default of those that assign it, else 0 (the driver applies a
    default only with ``CU_GRAPH_COND_ASSIGN_DEFAULT``)."""
    return {h: r.default if r.assign_default else 0 for h, r in handles.items()}


# Handles are never reused in a process, across instances too, as the
# driver's are not while alive (the package remembers some by handle).
_numbers = itertools.count(1)

#: Bodies a conditional node of each kind may have (WHILE one, IF one or
#: two, SWITCH any number from one).
_BODY_COUNTS = {COND_IF: (1, 2), COND_WHILE: (1, 1), COND_SWITCH: (1, (1 << 32) - 1)}
#: The most bodies a node given the driver's array of them (recording
#: driver) may have: the array is made at once.
ARRAY_BODIES = 1 << 16


class GraphState:
    """Captures by stream handle, graphs and executable graphs by handles
    never reused, conditional handles and nodes. *keep_destroyed*: destroyed
    records stay, marked ``destroyed`` (else they and what they hold are
    dropped). *own(launch)* is an executable graph's copy of a recorded
    launch; *update(new, old)* what a node runs after ``cuGraphExecUpdate``
    replaced *old* by *new*."""

    def __init__(self, keep_destroyed=False, own=_no_change, update=_no_change):
        self.lock = threading.Lock()
        self.captures = {}  # stream handle -> Capture
        self.graphs = {}    # handle -> RecordedGraph (conditional nodes' bodies too)
        self.execs = {}     # handle -> RecordedExec
        self.handles = {}   # conditional handle -> ConditionalHandleRecord
        self._containing = {}  # conditional node -> the graph it is in
        self._body_arrays = {}  # conditional node -> its bodies as a C array (CUgraph*)
        self._keep_destroyed = keep_destroyed
        self._own = own
        self._update = update

    @staticmethod
    def _handle(base):
        return base + 16 * next(_numbers)

    @staticmethod
    def _live(table, handle):
        value = table.get(handle)
        return None if value is None or value.destroyed else value

    def live(self):
        """The handles of the graphs and executable graphs not destroyed (a
        conditional node's bodies are its graph's, not listed)."""
        with self.lock:
            return ([h for h, g in self.graphs.items() if not g.destroyed and not g.body_of]
                    + [h for h, e in self.execs.items() if not e.destroyed])

    @property
    def nodes(self):
        """The nodes of the graphs not destroyed: node -> graph handle."""
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
        """What node *node* records (in a graph or a capture): a launch or a
        :class:`ConditionalNode`; None for no node."""
        with self.lock:
            for owner in list(self.graphs.values()) + list(self.captures.values()):
                if node in owner.by_node:
                    return owner.by_node[node]
        return None

    def begin_capture(self, stream, mode, device=0):
        """``cuStreamBeginCapture``: *stream* (of *device*) records a new graph."""
        if stream == 0:
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
        with self.lock:
            if stream in self.captures:
                return CUDA_ERROR_ILLEGAL_STATE
            self.captures[stream] = Capture(mode, threading.get_ident(),
                                            self._handle(0x60000000), device=device)
        return 0

    def begin_capture_to_graph(self, stream, graph, mode):
        """``cuStreamBeginCaptureToGraph``: *stream* records into existing
        graph *graph* (a conditional node's body)."""
        if stream == 0:
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
        with self.lock:
            if stream in self.captures:
                return CUDA_ERROR_ILLEGAL_STATE
            g = self._live(self.graphs, graph)
            if g is None:
                return CUDA_ERROR_INVALID_VALUE
            self.captures[stream] = Capture(mode, threading.get_ident(), graph, g.by_node,
                                            device=g.device)
        return 0

    def capture_of(self, stream):
        """The :class:`Capture` on *stream*, or None."""
        with self.lock:
            return self.captures.get(stream)

    def _end(self, stream):
        capture = self.captures.get(stream)
        if capture is None:
            return CUDA_ERROR_ILLEGAL_STATE, None
        if capture.mode != CAPTURE_RELAXED and capture.thread != threading.get_ident():
            return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, None
        del self.captures[stream]
        return 0, capture

    def _bodies_recorded(self, stream):
        """True if a body of a node of the graph *stream* records is being
        recorded on another stream (its recording may not end then)."""
        capture = self.captures.get(stream)
        if capture is None:
            return False
        return any(c.graph in self.graphs and self.graphs[c.graph].body_of and
                   self._containing.get(self.graphs[c.graph].body_of) == capture.graph
                   for s, c in self.captures.items() if s != stream)

    def end_capture(self, stream):
        """``(status, graph handle)``, the handle 0 on failure; a capture
        into an existing graph (a body) gives that graph. A recording with a
        body still being recorded does not end
        (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``)."""
        with self.lock:
            if self._bodies_recorded(stream):
                return CUDA_ERROR_STREAM_CAPTURE_UNJOINED, 0
            status, capture = self._end(stream)
            if status:
                return status, 0
            if capture.invalidated:
                if capture.graph not in self.graphs:
                    self._drop_made_in(capture.graph, capture.by_node)
                return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, 0
            if capture.graph not in self.graphs:
                self.graphs[capture.graph] = RecordedGraph(capture.graph, capture.by_node,
                                                           capture.mode, device=capture.device)
        return 0, capture.graph

    def abort_capture(self, stream):
        """End the capture on *stream*, if any, dropping what it recorded
        (a body's recording leaves the body empty); not while a body of it
        is being recorded (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``)."""
        with self.lock:
            if stream not in self.captures:
                return 0
            if self._bodies_recorded(stream):
                return CUDA_ERROR_STREAM_CAPTURE_UNJOINED
            status, capture = self._end(stream)
            if not status:
                self._drop_made_in(capture.graph, capture.by_node)
                capture.by_node.clear()  # a body's nodes are its graph's
            return status

    def end_recording(self, stream, body):
        """End the recording on *stream* as the package does (a body's if
        *body*, else a graph's): ``(status, reason, graph)``, *reason* an
        ``END_*`` value of :mod:`.graph`. Refused with the recording going
        on: a body's ended as a graph's or the other way round
        (``CUDA_ERROR_ILLEGAL_STATE``), one with a body of its nodes being
        recorded (``CUDA_ERROR_STREAM_CAPTURE_UNJOINED``), one holding a
        WHILE node whose body is empty (``CUDA_ERROR_INVALID_VALUE``)."""
        with self.lock:
            capturing = stream in self.captures
            open_ = self._bodies_recorded(stream)
        records_body = self.records_body(stream)
        if body and not records_body:
            return (CUDA_ERROR_ILLEGAL_STATE,
                    END_RECORDS_GRAPH if capturing else END_NOT_CAPTURING, 0)
        if records_body and not body:
            return CUDA_ERROR_ILLEGAL_STATE, END_RECORDS_BODY, 0
        if open_:
            return CUDA_ERROR_STREAM_CAPTURE_UNJOINED, END_BODY_OPEN, 0
        if self.empty_while(stream):
            return CUDA_ERROR_INVALID_VALUE, END_WHILE_EMPTY, 0
        status, graph = self.end_capture(stream)
        return status, END_NOT_CAPTURING if status == CUDA_ERROR_ILLEGAL_STATE else 0, graph

    def records_body(self, stream):
        """True if *stream* records a conditional node's body."""
        with self.lock:
            capture = self.captures.get(stream)
            return capture is not None and capture.graph in self.graphs and \
                bool(self.graphs[capture.graph].body_of)

    def empty_while(self, stream):
        """True if the recording on *stream* holds a WHILE node whose body
        has no node (on a GPU it would loop for ever)."""
        with self.lock:
            capture = self.captures.get(stream)
            return capture is not None and any(
                isinstance(n, ConditionalNode) and n.kind == COND_WHILE and
                not any(self.graphs[b].by_node for _, b in n.existing())
                for n in capture.by_node.values())

    def nodes_of(self, graph):
        """The node handles of *graph* (live or being recorded), or None."""
        with self.lock:
            nodes = self._nodes_of(graph)
            return None if nodes is None else list(nodes)

    def destroy_node(self, node):
        """``cuGraphDestroyNode``: *node* leaves its graph (a conditional
        node with its bodies)."""
        with self.lock:
            owners = [g.by_node for g in self.graphs.values() if not g.destroyed] + \
                [c.by_node for c in self.captures.values()]
            for nodes in owners:
                if node in nodes:
                    self._drop_made_in(None, {node: nodes.pop(node)})
                    return 0
        return CUDA_ERROR_INVALID_VALUE

    # -- conditional handles and nodes ---------------------------------------------

    def _nodes_of(self, graph):
        """The nodes of *graph* (live, or being recorded by a capture), or None."""
        g = self._live(self.graphs, graph)
        if g is not None:
            return g.by_node
        for capture in self.captures.values():
            if capture.graph == graph:
                return capture.by_node
        return None

    def _outer_graphs(self, graph):
        """*graph* and the graphs around it (a body's node's graph, ...)."""
        out = [graph]
        while graph in self.graphs and self.graphs[graph].body_of:
            graph = self._containing[self.graphs[graph].body_of]
            out.append(graph)
        return out

    def create_handle(self, graph, context, default, flags):
        """``cuGraphConditionalHandleCreate``: ``(status, handle)``."""
        with self.lock:
            if self._nodes_of(graph) is None or flags not in (0, ASSIGN_DEFAULT):
                return CUDA_ERROR_INVALID_VALUE, 0
            handle = self._handle(0x50000000)
            self.handles[handle] = ConditionalHandleRecord(
                graph, default & 0xFFFFFFFF, bool(flags & ASSIGN_DEFAULT), context)
        return 0, handle

    def add_conditional(self, graph, context, handle, kind, size, device=0, array=True):
        """``cuGraphAddNode`` of a conditional node in *graph* (after its
        last node): ``(status, node, address of its bodies' C array)``. The
        handle must be of *graph* or of a graph around it, and of
        *context* (of *device*, which its bodies are recorded for). Without
        *array* the bodies are made when first asked for (:meth:`body`) and
        the address is the node's handle; with it, a node of more than
        :data:`ARRAY_BODIES` is ``CUDA_ERROR_OUT_OF_MEMORY``."""
        with self.lock:
            nodes = self._nodes_of(graph)
            record = self.handles.get(handle)
            low, high = _BODY_COUNTS.get(kind, (1, 0))
            if nodes is None or record is None or not low <= size <= high or \
                    record.graph not in self._outer_graphs(graph) or record.context != context:
                return CUDA_ERROR_INVALID_VALUE, 0, 0
            if array and size > ARRAY_BODIES:
                return CUDA_ERROR_OUT_OF_MEMORY, 0, 0
            node = self._handle(0x70000000)

            def make():
                body = self._handle(0x60000000)
                self.graphs[body] = RecordedGraph(body, {}, 0, body_of=node, device=device)
                return body
            lazy = LazyBodies(size, make)
            self._containing[node] = graph
            if array:  # the driver's array of them, made at once
                made = tuple(lazy[i] for i in range(size))
                self._body_arrays[node] = (ctypes.c_void_p * size)(*made)
            nodes[node] = ConditionalNode(kind, handle, made if array else lazy)
        return 0, node, ctypes.addressof(self._body_arrays[node]) if array else node

    def body(self, node, index):
        """Body graph *index* of conditional node *node* (made now if it was
        not yet), or 0 for none."""
        with self.lock:
            graph = self._containing.get(node)
            nodes = None if graph is None else self._nodes_of(graph)
            found = None if nodes is None else nodes.get(node)
            if not isinstance(found, ConditionalNode) or not 0 <= index < found.size:
                return 0
            return found.bodies[index]

    def _conditionals(self, graph):
        nodes = self._nodes_of(graph) or {}
        return [n for n in nodes.values() if isinstance(n, ConditionalNode)]

    def _graphs_inside(self, graph):
        """*graph* and every body inside it."""
        out = [graph]
        for node in self._conditionals(graph):
            for _, body in node.existing():
                out.extend(self._graphs_inside(body))
        return out

    def _drop_made_in(self, graph, nodes):
        """Forget the handles and bodies made in *graph* (whose *nodes* are
        gone with it)."""
        for node, value in nodes.items():
            if isinstance(value, ConditionalNode):
                for _, body in value.existing():
                    self._drop_made_in(body, self.graphs[body].by_node)
                    if self._keep_destroyed:
                        self.graphs[body].destroyed = True
                    else:
                        del self.graphs[body]
                self._containing.pop(node, None)
                self._body_arrays.pop(node, None)
        if not self._keep_destroyed:
            for handle in [h for h, r in self.handles.items() if r.graph == graph]:
                del self.handles[handle]

    # -- executable graphs -------------------------------------------------------------

    def _own_nodes(self, nodes):
        return {node: ExecConditional(v.kind, v.handle, {
                    i: self._own_nodes(self.graphs[b].by_node) for i, b in v.existing()}, v.size)
                if isinstance(v, ConditionalNode) else self._own(v)
                for node, v in nodes.items()}

    def instantiate(self, graph):
        """``(status, executable graph handle)``, the handle 0 on failure:
        ``CUDA_ERROR_INVALID_VALUE`` for a graph whose body is still being
        recorded, or that made a conditional handle no node uses (as the
        driver refuses it)."""
        with self.lock:
            g = self._live(self.graphs, graph)
            inside = set(self._graphs_inside(graph))
            if g is None or any(c.graph in inside for c in self.captures.values()):
                return CUDA_ERROR_INVALID_VALUE, 0
            handles = {h: r for h, r in self.handles.items() if r.graph in inside}
            used = {n.handle for body in inside for n in self._conditionals(body)}
            if set(handles) - used:
                return CUDA_ERROR_INVALID_VALUE, 0
            if handles and any(e.graph == graph and not e.destroyed
                               for e in self.execs.values()):
                # one executable graph at a time of a graph with conditional nodes
                return CUDA_ERROR_NOT_SUPPORTED, 0
            handle = self._handle(0x68000000)
            self.execs[handle] = RecordedExec(handle, graph, self._own_nodes(g.by_node),
                                              handles=handles, values=_initial(handles),
                                              device=g.device)
        return 0, handle

    def exec_launches(self, exe):
        """What a replay of *exe* runs, in node order; None if *exe* is not live."""
        with self.lock:
            e = self._live(self.execs, exe)
            return None if e is None else tuple(e.launches.values())

    def exec_record(self, exe):
        """The :class:`RecordedExec` of *exe*, or None if it is not live."""
        with self.lock:
            return self._live(self.execs, exe)

    @staticmethod
    def _find(launches, node):
        """The dict of *launches* (nested in conditional bodies) holding *node*."""
        if node in launches:
            return launches
        for launch in launches.values():
            if isinstance(launch, ExecConditional):
                for body in launch.bodies.values():
                    found = GraphState._find(body, node)
                    if found is not None:
                        return found
        return None

    def _exec_node(self, exe, node):
        """``(dict holding kernel node node, its launch)`` in *exe*, or None."""
        e = self._live(self.execs, exe)
        # A node belongs to its graph: dropping the graph's record drops it
        # (a record kept after destroy does not: the driver would not notice).
        if e is None or e.graph not in self.graphs:
            return None
        where = self._find(e.launches, node)
        if where is None or isinstance(where[node], ExecConditional):
            return None
        return where, where[node]

    def exec_node(self, exe, node):
        """What kernel node *node* of executable graph *exe* runs, or None."""
        with self.lock:
            found = self._exec_node(exe, node)
        return None if found is None else found[1]

    def set_node(self, exe, node, make_launch):
        """``cuGraphExecKernelNodeSetParams``: kernel node *node* of *exe* (in
        a conditional body too) runs ``make_launch(old)``, *old* what it
        ran; ``(status, the launch set)``."""
        with self.lock:
            found = self._exec_node(exe, node)
            if found is None:
                return CUDA_ERROR_INVALID_VALUE, None
            where, old = found
            new = where[node] = make_launch(old)
        return 0, new

    def _body_launches(self, graph):
        return list(self.graphs[graph].by_node.values())

    def _apply_update(self, launches, nodes):
        """Replace what *launches* (an executable graph's) run by graph
        *nodes*' launches, bodies included; conditional nodes take the
        graph's handles."""
        for (node, old), new in zip(list(launches.items()), nodes.values()):
            if isinstance(old, ExecConditional):
                old.handle = new.handle
                for index, graph in new.existing():
                    if index in old.bodies:  # else it has no nodes: nothing to update
                        self._apply_update(old.bodies[index], self.graphs[graph].by_node)
            else:
                launches[node] = self._update(new, old)

    def exec_update(self, exe, graph):
        """``cuGraphExecUpdate``: ``(status, CUgraphExecUpdateResult)``."""
        with self.lock:
            e, g = self._live(self.execs, exe), self._live(self.graphs, graph)
            if e is None or g is None:
                return CUDA_ERROR_INVALID_VALUE, 0
            result = _update_result(list(g.by_node.values()), list(e.launches.values()),
                                    self._body_launches)
            if result:
                return CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, result
            self._apply_update(e.launches, g.by_node)
            inside = set(self._graphs_inside(graph))
            e.handles = {h: r for h, r in self.handles.items() if r.graph in inside}
            e.values = _initial(e.handles)
        return 0, 0

    def destroy(self, table, handle):
        """``cuGraphDestroy``/``cuGraphExecDestroy`` of *handle* in *table*
        (:attr:`graphs` or :attr:`execs`). A conditional node's body belongs
        to the node: it goes with its graph, never alone."""
        with self.lock:
            value = self._live(table, handle)
            if value is None or getattr(value, "body_of", None):
                return CUDA_ERROR_INVALID_VALUE
            if table is self.graphs:
                self._drop_made_in(handle, value.by_node)
            if self._keep_destroyed:
                table[handle].destroyed = True
            else:
                del table[handle]
        return 0
