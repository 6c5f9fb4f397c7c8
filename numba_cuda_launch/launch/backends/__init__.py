"""Launch backends: how this process carries out what compiled code asks of
the GPU. One backend serves the whole process, chosen here once:
:mod:`.driver` (the CUDA driver) or, under numba-cuda's simulator,
:mod:`.simulator` (kernels run in Python on host memory, CUDA graphs in
:mod:`.simgraph`). The rest of the package asks :data:`BACKEND` and never
which one it is. docs/architecture.md, step 5.
"""

from numba_cuda_launch.compat import simulator as _simulator
from numba_cuda_launch.launch.backends.backend import LaunchBackend

__all__ = ["LaunchBackend", "BACKEND"]


if _simulator.enabled():
    from numba_cuda_launch.launch.backends.simulator import SimulatorBackend as _Backend
else:
    from numba_cuda_launch.launch.backends.driver import DriverBackend as _Backend


#: The backend of this process.
BACKEND: LaunchBackend = _Backend()
