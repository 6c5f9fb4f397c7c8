"""Launch ``@cuda.jit`` kernels from CPU nopython code.

``import numba_cuda_launch`` once; then ``@numba.cfunc`` and ``@numba.njit``
functions can write ``kernel[griddim, blockdim, stream, sharedmem](args...)``,
compiled to a direct ``cuLaunchKernel`` call with no Python in the way
(README.md). Four layers, imports pointing one way: :mod:`.interop` ->
:mod:`.launch` -> :mod:`.cudadrv` -> :mod:`.compat`, with :mod:`.errors` and
:mod:`.config` below all (docs/architecture.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from numba_cuda_launch.compat import overrides as _overrides
from numba_cuda_launch.compat import simulator as _simulator
from numba_cuda_launch.compat import versions as _versions

_versions.check_versions()
_simulator.refuse_builtin_cuda()
# Every replacement of a Numba/numba-cuda/numba-cuda-mlir attribute, before
# any kernel is typed (docs/overrides.md); numba-cuda-mlir's once it is
# imported, before its eager kernels compile.
_overrides.install()

from numba_cuda_launch._version import __version__  # noqa: E402
from numba_cuda_launch import config as _config  # noqa: E402
from numba_cuda_launch.config import (  # noqa: E402
    get_compute_capabilities,
    get_compute_capability,
)
from numba_cuda_launch.errors import (  # noqa: E402
    CudaError,
    CudaGraphError,
    CudaLaunchError,
    KernelTypingError,
    NopythonUsageError,
    error_name,
)
from numba_cuda_launch import launch  # noqa: E402,F401  (registers kernel[...])
from numba_cuda_launch.launch.devicearray import on_stream  # noqa: E402  (device arrays)
from numba_cuda_launch.launch.pointer import as_voidptr  # noqa: E402
from numba_cuda_launch.kernels.foreign import foreign_kernel  # noqa: E402
from numba_cuda_launch.cudadrv.driver import driver_problem  # noqa: E402
from numba_cuda_launch.launch.intrinsics import (  # noqa: E402  (called in kernels)
    griddepcontrol_launch_dependents,
    griddepcontrol_wait,
)
from numba_cuda_launch.cudadrv.launch import (  # noqa: E402
    check_pointers,
    pointer_checks_enabled,
)

__all__ = [
    "__version__",
    "CudaError",
    "CudaLaunchError",
    "CudaGraphError",
    "KernelTypingError",
    "NopythonUsageError",
    "KernelHandle",
    "error_name",
    "kernel_handle",
    "foreign_kernel",
    "driver_problem",
    "as_voidptr",
    "get_compute_capability",
    "get_compute_capabilities",
    "set_compute_capability",
    "check_pointers",
    "on_stream",
    "pointer_checks_enabled",
    "synchronize",
    "synchronize_status",
    "stream_synchronize",
    "stream_synchronize_status",
    "stream_query",
    "stream_query_status",
    "Event",
    "event",
    "event_status",
    "griddepcontrol_wait",
    "griddepcontrol_launch_dependents",
]


# Loaded when first used, here or in nopython code (``numba_cuda_launch.graphs``
# in an @njit function): a program that launches kernels does not pay for the
# registrations of events, synchronisation, CUDA graphs and kernel handles
# (docs/architecture.md, "Imports on demand").
_ON_DEMAND = {
    "graphs": ".graphs",
    "Event": ".launch.events",
    "event": ".launch.events",
    "event_status": ".launch.events",
    "synchronize": ".launch.sync",
    "synchronize_status": ".launch.sync",
    "stream_synchronize": ".launch.sync",
    "stream_synchronize_status": ".launch.sync",
    "stream_query": ".launch.sync",
    "stream_query_status": ".launch.sync",
    "KernelHandle": ".launch.handle",
    "kernel_handle": ".launch.handle",
}


if TYPE_CHECKING:  # type checkers see the names loaded on demand as they are
    from numba_cuda_launch import graphs  # noqa: F401
    from numba_cuda_launch.launch.events import Event, event, event_status  # noqa: F401
    from numba_cuda_launch.launch.handle import KernelHandle, kernel_handle  # noqa: F401
    from numba_cuda_launch.launch.sync import (  # noqa: F401
        stream_query,
        stream_query_status,
        stream_synchronize,
        stream_synchronize_status,
        synchronize,
        synchronize_status,
    )


def __getattr__(name: str) -> Any:
    """The names of :data:`_ON_DEMAND`, imported when first asked for."""
    module_name = _ON_DEMAND.get(name)
    if module_name is None:
        raise AttributeError("module %r has no attribute %r" % (__name__, name))
    import importlib

    from numba_cuda_launch.compat.numba_extending import refresh_cpu_contexts

    module = importlib.import_module(module_name, __name__)
    refresh_cpu_contexts()  # asked for while Numba types a function
    value = module if module_name == "." + name else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ON_DEMAND))


def set_compute_capability(
        cc: _config.ComputeCapability | _config.ComputeCapabilities | None) -> None:
    """Build kernel images for compute capability *cc* (``(9, 0)``,
    ``"9.0"``, ...) when no GPU is present; ``None`` clears the setting
    (ValueError for any other value). A list (``[(8, 0), (9, 0)]``) builds
    portable images of numba-cuda and numba-cuda-mlir kernels, with or
    without a GPU, for architectures the installed CUDA toolkit builds for
    (docs/architecture.md). With no GPU, numba-cuda-mlir keeps the
    architecture of its first compilation in the process (its eager kernels
    compile at decoration): call this before its first kernel compiles."""
    from numba_cuda_launch.compat import cuda_target as _cuda_target

    source = "set_compute_capability()"
    if cc is not None:
        setting = _config.parse_setting(cc, source)
        if isinstance(setting[0], tuple):
            bad, supported = _cuda_target.unsupported_architectures(setting)
            if bad:
                raise ValueError(
                    "%s: the installed CUDA toolkit does not build for compute capability "
                    "%s (it builds for %s; %d.%d is the lowest)" % (
                        source, ", ".join("%d.%d" % c for c in bad),
                        ", ".join("%d.%d" % c for c in supported), *supported[0]))
    _config.set_compute_capability(cc)
    _overrides.install()

