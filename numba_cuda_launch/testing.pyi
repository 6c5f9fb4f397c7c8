# Type hints of numba_cuda_launch.testing (PEP 561); the recorded launches,
# graphs and queries are annotated dataclasses. tests/test_public_modules.py
# checks these against the module.

from numba_cuda_launch.cudadrv.recording import CodeChoice as CodeChoice
from numba_cuda_launch.cudadrv.recording import ConditionalHandleRecord as ConditionalHandleRecord
from numba_cuda_launch.cudadrv.recording import ConditionalNode as ConditionalNode
from numba_cuda_launch.cudadrv.recording import Launch as Launch
from numba_cuda_launch.cudadrv.recording import OccupancyQuery as OccupancyQuery
from numba_cuda_launch.cudadrv.recording import RecordedExec as RecordedExec
from numba_cuda_launch.cudadrv.recording import RecordedGraph as RecordedGraph
from numba_cuda_launch.cudadrv.recording import RecordingDriver as RecordingDriver

__all__: list[str]

def occupancy_model(block_size: int, sharedmem: int) -> int: ...
