"""CUDA graphs from nopython code: record launches by stream capture, replay
them, change their arguments (docs/graphs.md).

``begin_capture(stream)`` ... ``end_capture(stream)`` gives a :class:`Graph`,
``graph.instantiate()`` a :class:`GraphExec` to ``launch(stream)`` and
``update_launch(node, ...)`` (``last_launch``). The implementation is
:mod:`numba_cuda_launch.launch.graph`.
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
