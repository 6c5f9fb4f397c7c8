"""Testing launch code without a GPU.

:class:`RecordingDriver`, a context manager, takes the CUDA driver's place for
launches from compiled code and records loads, launches, synchronisation,
events, graphs (conditional nodes too), occupancy queries and a fatbin's
code choice, each with the device it went to when it plays several
(README.md, "Testing without a GPU"; docs/devices.md). The implementation
is :mod:`numba_cuda_launch.cudadrv.recording`.
"""

from numba_cuda_launch.cudadrv.recording import (
    RecordingDriver,
    Launch,
    RecordedGraph,
    RecordedExec,
    OccupancyQuery,
    CodeChoice,
    ConditionalNode,
    ConditionalHandleRecord,
    occupancy_model,
)

__all__ = [
    "RecordingDriver",
    "Launch",
    "RecordedGraph",
    "RecordedExec",
    "OccupancyQuery",
    "CodeChoice",
    "ConditionalNode",
    "ConditionalHandleRecord",
    "occupancy_model",
]
