"""CUDA graphs under numba-cuda's CUDA simulator: a launch on a capturing
stream is recorded instead of run, an executable graph replays the records
in order. The bookkeeping and its ``CUresult`` values are the recording
driver's (:mod:`numba_cuda_launch.cudadrv.graphstate`); compiled code reaches
it through one object-mode helper (:class:`Emitters`, standing in for
:mod:`numba_cuda_launch.cudadrv.graph`). docs/graphs.md, "Under numba-cuda's simulator".
"""

from dataclasses import dataclass

import numba
from llvmlite import ir
from numba.core import types

from numba_cuda_launch.errors import CUDA_ERROR_INVALID_VALUE
from numba_cuda_launch.launch.refusals import call_jitted
from numba_cuda_launch.cudadrv.graph import (
    NODE_NOT_CAPTURING, NODE_NOT_KERNEL, NODE_NOT_ONE, NODE_OK)
from numba_cuda_launch.cudadrv.graphstate import GraphState

__all__ = ["KernelLaunch", "STATE", "Emitters"]


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
    kernel = None  # what an executable graph update compares: none here

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


def _begin_capture(stream, mode):
    return STATE.begin_capture(stream, mode), 0, 0


def _end_capture(stream, _):
    status, graph = STATE.end_capture(stream)
    return status, 0, graph


def _abort_capture(stream, _):
    return STATE.abort_capture(stream), 0, 0


def _last_node(stream, _):
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


def _instantiate(graph, _):
    status, exe = STATE.instantiate(graph)
    return status, 0, exe


def _graph_launch(exe, stream):
    launches = STATE.exec_launches(exe)
    if launches is None:
        return CUDA_ERROR_INVALID_VALUE, 0, 0
    status = STATE.record(stream, _ChildGraph(launches))
    return (_replay(launches) if status is None else status), 0, 0


def _exec_update(exe, graph):
    return STATE.exec_update(exe, graph) + (0,)


def _graph_destroy(graph, _):
    return STATE.destroy(STATE.graphs, graph), 0, 0


def _exec_destroy(exe, _):
    return STATE.destroy(STATE.execs, exe), 0, 0


#: The simulated driver's graph state, one per process (as the driver's).
STATE = GraphState()

# What compiled code asks for by number: (status, reason or result, handle).
_OPERATIONS = (_begin_capture, _end_capture, _abort_capture, _last_node, _instantiate,
               _graph_launch, _exec_update, _graph_destroy, _exec_destroy)


_RESULT = types.UniTuple(types.int64, 3)


@numba.njit
def _operate(op, a, b):
    with numba.objmode(out=_RESULT):
        out = _OPERATIONS[op](a, b)
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

    def _call(self, builder, op, *values):
        """``(status, reason, handle)`` of *op* (of :data:`_OPERATIONS`) on
        *values* (handles, ``i8*``, or integers)."""
        args = [ir.Constant(_i64, _OPERATIONS.index(op))]
        for v in values + (ir.Constant(_i64, 0),) * (2 - len(values)):
            if v.type == _i8p:
                v = builder.ptrtoint(v, _i64)
            elif v.type.width < 64:
                v = builder.zext(v, _i64)
            args.append(v)
        out = call_jitted(self.context, builder, _operate,
                          (types.int64, types.uint64, types.uint64), args)
        status, reason, handle = (builder.extract_value(out, i) for i in range(3))
        return (builder.trunc(status, _i32), builder.trunc(reason, _i32),
                builder.inttoptr(handle, _i8p))

    def emit_begin_capture(self, builder, stream, mode):
        return self._call(builder, _begin_capture, stream, mode)[0]

    def emit_end_capture(self, builder, stream):
        status, _, graph = self._call(builder, _end_capture, stream)
        return status, graph

    def emit_abort_capture(self, builder, stream):
        return self._call(builder, _abort_capture, stream)[0]

    def emit_last_node(self, builder, stream):
        return self._call(builder, _last_node, stream)

    def emit_instantiate(self, builder, graph):
        status, _, exe = self._call(builder, _instantiate, graph)
        return status, exe

    def emit_graph_launch(self, builder, exe, stream):
        return self._call(builder, _graph_launch, exe, stream)[0]

    def emit_exec_update(self, builder, exe, graph):
        return self._call(builder, _exec_update, exe, graph)[:2]

    def emit_graph_destroy(self, builder, graph):
        return self._call(builder, _graph_destroy, graph)[0]

    def emit_exec_destroy(self, builder, exe):
        return self._call(builder, _exec_destroy, exe)[0]
