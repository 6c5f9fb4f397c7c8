"""``cache=True`` for functions that launch kernels: lowering records checks
that Numba runs when it loads the cached code in a later process. Code is
used only for the launch target it was built for (the architecture of its
images, not under the simulator: simulated launches call back into this
process's Python objects) and by the build of this package that compiled it
(Numba's cache knows only the user's source). See README.md and
docs/architecture.md.
"""

from dataclasses import dataclass

from numba_cuda_launch.cudadrv.driver import link_runtime
from numba_cuda_launch.cudadrv.image import remember_param_sizes
from numba_cuda_launch.compat.numba_caching import (  # noqa: F401 (package_build: public here)
    LaunchTargetChanged,
    add_reload_checks,
    package_build,
    sources_digest,
)
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.backends.backend import BOUND_TARGET

__all__ = [
    "package_build",
    "BuildCheck",
    "current_target",
    "LaunchTargetCheck",
    "DriverCallCheck",
    "record_driver_calls",
    "ParamSizes",
]


def current_target():
    """This process's launch target, as recorded in cached code: the
    backend's :meth:`~.backends.LaunchBackend.cache_target` (``("driver",
    architectures)`` or ``("simulator",)``)."""
    return BACKEND.cache_target()


def _portable_runs_on(built, now):
    """Whether images built for a list *built* run on compute capability *now*."""
    return bool(isinstance(built, tuple) and built and isinstance(built[0], tuple)
                and isinstance(now[0], int) and tuple(now) >= built[0])


@dataclass(frozen=True)
class LaunchTargetCheck:
    """Run by Numba when it loads cached code: refuses it (a cache miss) if
    this process launches on another target. Images built for a list of
    architectures run on the lowest listed or newer (the driver compiles
    their PTX)."""

    target: tuple

    def __call__(self):
        now = current_target()
        # Simulated launches of bound kernels: their BoundKernelCheck says
        # whether this process has the kernels.
        if self.target == BOUND_TARGET and now[0] == BOUND_TARGET[0]:
            return
        # No GPU and no configured architecture (None): launches fail with
        # CUDA_ERROR_NO_DEVICE whatever the image, so the code may be used.
        if now[0] == self.target[0] == "driver" and (
                now == self.target or now[1] is None
                or _portable_runs_on(self.target[1], now[1])):
            return
        raise LaunchTargetChanged("cached for %s, this process launches on %s"
                                  % (self.target, now))


@dataclass(frozen=True)
class BuildCheck:
    """Run by Numba when it loads cached code that launches kernels or calls
    the driver: refuses it (a cache miss) if another build of this package
    compiled it, whose emitted code and pickled references may not match."""

    build: str

    def __call__(self):
        if self.build != package_build():
            raise LaunchTargetChanged("cached by another build of numba-cuda-launch")


@dataclass(frozen=True)
class DriverCallCheck:
    """Run by Numba when it loads cached code that synchronises, uses events
    or graphs (no image, so no architecture to match): used in a process of
    the same backend, and never when built by one whose code calls back into
    its own process (the simulator's)."""

    backend: str

    def __call__(self):
        if self.backend != BACKEND.name or BACKEND.runs_on_host:
            raise LaunchTargetChanged("cached for the %s backend, this process uses the %s "
                                      "backend" % (self.backend, BACKEND.name))


def record_driver_calls(context):
    """Record, in the function being lowered, that it calls the backend's
    synchronisation, event or graph functions (and link the package's
    runtime, which they call, into it)."""
    add_reload_checks(context, [DriverCallCheck(BACKEND.name), BuildCheck(package_build())])
    link_runtime(context)


@dataclass(frozen=True)
class ParamSizes:
    """Run by Numba when it loads cached launch code: tells this process the
    parameter sizes of a kernel it launches (for the recording driver), as
    lowering did in the process that compiled it. Never refuses."""

    entry_name: str
    sizes: tuple

    def __call__(self):
        remember_param_sizes(self.entry_name, self.sizes)
