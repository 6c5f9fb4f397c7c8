"""Launch ``@cuda.jit`` kernels from CPU nopython code.

``import numba_cuda_launch`` once; then ``@numba.cfunc`` and ``@numba.njit``
functions can write ``kernel[griddim, blockdim, stream, sharedmem](args...)``,
compiled to a direct ``cuLaunchKernel`` call with no Python in the way.

Where things live:

* :mod:`.launchconfig` -- the type of ``kernel[...]``, its typing and lowering;
* :mod:`.kernelcall` -- typing of the call (overload choice) and its lowering;
* :mod:`.params` -- packing arguments in numba-cuda's kernel parameter ABI;
* :mod:`.image` -- the kernel image a function carries and its first load;
* :mod:`.driver` -- the driver table compiled code calls through;
* :mod:`.stream` -- numba-cuda stream objects as nopython arguments;
* :mod:`.halfmodel` -- float16 storage (pointers, arrays) in CPU code;
* :mod:`.handle` -- the public handle-and-layout API for C callers;
* :mod:`.simulator` -- launches under numba-cuda's CUDA simulator;
* :mod:`._compat` -- every use of numba-cuda internals.
"""

from numba_cuda_launch import _compat

_compat.check_versions()
if not _compat.simulator_enabled():
    _compat.install_deviceless_compilation()

from numba_cuda_launch._version import __version__  # noqa: E402
from numba_cuda_launch.config import (  # noqa: E402
    get_compute_capability,
    set_compute_capability,
)
from numba_cuda_launch.errors import (  # noqa: E402
    CudaLaunchError,
    KernelTypingError,
    error_name,
)
from numba_cuda_launch import halfmodel, stream, launchconfig, kernelcall  # noqa: E402,F401
from numba_cuda_launch.handle import KernelHandle, kernel_handle  # noqa: E402
from numba_cuda_launch.driver import driver_problem  # noqa: E402
from numba_cuda_launch.pointer import as_voidptr  # noqa: E402

if _compat.simulator_enabled():
    from numba_cuda_launch import simulator  # noqa: E402,F401

__all__ = [
    "__version__",
    "CudaLaunchError",
    "KernelTypingError",
    "KernelHandle",
    "error_name",
    "kernel_handle",
    "driver_problem",
    "as_voidptr",
    "get_compute_capability",
    "set_compute_capability",
]
