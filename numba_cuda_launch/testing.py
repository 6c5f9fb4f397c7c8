"""Testing launch code without a GPU.

:class:`RecordingDriver`, used as a context manager, takes the place of the
CUDA driver for launches from compiled code and records image loads,
launches (:class:`Launch`), synchronisation and event calls, CUDA graphs
(:class:`RecordedGraph`, :class:`RecordedExec`) and occupancy queries
(:class:`OccupancyQuery`, answered by :func:`occupancy_model`), and, for a
fake device's compute capability, the code a fatbin runs (:class:`CodeChoice`). The
implementation is :mod:`numba_cuda_launch.cudadrv.recording`.
"""

from numba_cuda_launch.cudadrv.recording import (
    RecordingDriver,
    Launch,
    RecordedGraph,
    RecordedExec,
    OccupancyQuery,
    CodeChoice,
    occupancy_model,
)

__all__ = [
    "RecordingDriver",
    "Launch",
    "RecordedGraph",
    "RecordedExec",
    "OccupancyQuery",
    "CodeChoice",
    "occupancy_model",
]
