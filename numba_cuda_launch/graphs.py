"""CUDA graphs from nopython code: record launches by stream capture, replay
them, change their arguments, and let the GPU decide what runs with
conditional nodes (docs/graphs.md).

``begin_capture(stream)`` ... ``end_capture(stream)`` gives a :class:`Graph`,
``graph.instantiate()`` a :class:`GraphExec` to ``launch(stream)`` and
``update_launch(node, ...)`` (``last_launch``). In a graph being recorded,
``conditional_handle(stream)`` makes a :class:`ConditionalHandle`,
``add_while``/``add_if``/``add_if_else``/``add_switch`` append a
:class:`ConditionalNode` whose bodies ``begin_body(body_stream, node)`` ...
``end_body(body_stream)`` record, and kernels call ``set_conditional``. The
implementation is :mod:`numba_cuda_launch.launch.graph`,
:mod:`~numba_cuda_launch.launch.conditional` and
:mod:`~numba_cuda_launch.launch.intrinsics`.
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
from numba_cuda_launch.launch.conditional import (
    ConditionalHandle,
    conditional_handle_type,
    set_conditional,
    ConditionalNode,
    COND_IF,
    COND_WHILE,
    COND_SWITCH,
    conditional_handle,
    conditional_handle_status,
    add_if,
    add_if_status,
    add_if_else,
    add_if_else_status,
    add_while,
    add_while_status,
    add_switch,
    add_switch_status,
    begin_body,
    begin_body_status,
    end_body,
    end_body_status,
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
    "ConditionalHandle",
    "ConditionalNode",
    "conditional_handle_type",
    "COND_IF",
    "COND_WHILE",
    "COND_SWITCH",
    "conditional_handle",
    "conditional_handle_status",
    "add_if",
    "add_if_status",
    "add_if_else",
    "add_if_else_status",
    "add_while",
    "add_while_status",
    "add_switch",
    "add_switch_status",
    "begin_body",
    "begin_body_status",
    "end_body",
    "end_body_status",
    "set_conditional",
]
