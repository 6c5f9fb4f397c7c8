"""CUDA graphs from nopython code: record launches by stream capture, replay
them, change their arguments (docs/graphs.md).

In an ``@njit`` or ``@cfunc`` function, ``graphs.begin_capture(stream)``
starts recording the launches on *stream*, ``graphs.end_capture(stream)``
gives a :class:`Graph`, ``graph.instantiate()`` a :class:`GraphExec` whose
``launch(stream)`` replays them and whose ``update_launch(node, ...)``
changes the arguments of a recorded launch (``graphs.last_launch``). The
implementation is :mod:`numba_cuda_launch.launch.graph`.
"""

from numba_cuda_launch.launch.graph import (
    Graph,
    GraphExec,
    KernelNode,
    CAPTURE_GLOBAL,
    CAPTURE_THREAD_LOCAL,
    CAPTURE_RELAXED,
    begin_capture,
    begin_capture_status,
    end_capture,
    end_capture_status,
    last_launch,
    last_launch_status,
    abort_capture,
)

__all__ = [
    "Graph",
    "GraphExec",
    "KernelNode",
    "CAPTURE_GLOBAL",
    "CAPTURE_THREAD_LOCAL",
    "CAPTURE_RELAXED",
    "begin_capture",
    "begin_capture_status",
    "end_capture",
    "end_capture_status",
    "last_launch",
    "last_launch_status",
    "abort_capture",
]
