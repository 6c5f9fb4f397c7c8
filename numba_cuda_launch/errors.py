"""Exceptions raised by kernel launches and the names of CUDA driver errors."""

from __future__ import annotations

import collections
import numbers
import threading
from typing import Any

from numba.core.errors import NumbaNotImplementedError, TypingError

__all__ = ["CudaError", "CudaLaunchError", "CudaGraphError", "error_name",
           "NopythonUsageError", "NopythonUnsupportedError", "KernelTypingError",
           "called_without_configuration", "recent_headlines"]

# The one table of the driver results (``CUresult``) this package produces,
# tests for or commonly reports; every module imports its numbers from here.
# The full list of names comes from cuda-bindings when it is installed; this
# table keeps them readable on machines without it.
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_INITIALIZED = 3
CUDA_ERROR_NO_DEVICE = 100
CUDA_ERROR_INVALID_IMAGE = 200
CUDA_ERROR_INVALID_CONTEXT = 201
CUDA_ERROR_NO_BINARY_FOR_GPU = 209
CUDA_ERROR_INVALID_PTX = 218
CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222
CUDA_ERROR_INVALID_HANDLE = 400
CUDA_ERROR_ILLEGAL_STATE = 401
CUDA_ERROR_NOT_FOUND = 500
CUDA_ERROR_NOT_READY = 600
CUDA_ERROR_ILLEGAL_ADDRESS = 700
CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701
CUDA_ERROR_LAUNCH_TIMEOUT = 702
CUDA_ERROR_LAUNCH_FAILED = 719
CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE = 720
CUDA_ERROR_NOT_SUPPORTED = 801
CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900
CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901
CUDA_ERROR_STREAM_CAPTURE_UNJOINED = 904
CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906
CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD = 908
CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910
CUDA_ERROR_INVALID_CLUSTER_SIZE = 912
_KNOWN_NAMES = {value: name for name, value in globals().items() if name.startswith("CUDA_")}

# What usually causes the errors of image loading, stream capture and
# clusters, added to the messages of CudaLaunchError and CudaGraphError.
_IMAGE_LOAD = ("loading the kernel's image into the current context failed: the image was "
               "built for another architecture or a newer toolkit than this driver supports; "
               "an image built without a GPU must be built for the device's compute "
               "capability (set_compute_capability, NUMBA_CUDA_LAUNCH_CC), and one built for "
               "a list of them runs on devices of the lowest listed or newer")
_HINTS = {
    CUDA_ERROR_INVALID_IMAGE: _IMAGE_LOAD,
    CUDA_ERROR_NO_BINARY_FOR_GPU: _IMAGE_LOAD,
    CUDA_ERROR_INVALID_PTX: _IMAGE_LOAD,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION: _IMAGE_LOAD,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
        "the operation is not permitted while a stream is capturing: the legacy default "
        "stream (0) cannot be captured or used during a capture, and drivers older than "
        "CUDA 12.3 do not load kernel images during a capture (load them first with "
        "cfg.preload(args...))",
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
        "the capture was invalidated by an earlier operation that cannot be captured; it "
        "must still be ended (graphs.end_capture or graphs.abort_capture)",
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
        "a launch on the legacy default stream (0) would wait for a stream being captured; "
        "launch on the capturing stream (or a non-blocking stream)",
    CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
        "captures begun in the global or thread-local mode must end on the thread that "
        "began them",
    CUDA_ERROR_INVALID_CLUSTER_SIZE:
        "the cluster is larger than the kernel or device allows (8 blocks is the portable "
        "maximum) or does not divide the grid",
}


def error_name(status: int) -> str:
    """Return the CUDA driver's name for a ``CUresult`` value.

    ``error_name(0) == "CUDA_SUCCESS"``; unknown values give
    ``"CUDA_ERROR_<value>"``.
    """
    if isinstance(status, bool) or not isinstance(status, numbers.Integral):
        raise TypeError("error_name() takes a CUresult, an integer; got %r" % (status,))
    status = int(status)
    try:
        from cuda.bindings import driver as _drv

        return _drv.CUresult(status).name
    except Exception:  # cuda-bindings missing, or a value it does not know
        return _KNOWN_NAMES.get(status, "CUDA_ERROR_%d" % status)


class CudaError(RuntimeError):
    """A CUDA driver call made from compiled code failed.

    ``code`` is the ``CUresult`` value, ``name`` its driver name
    (``CUDA_ERROR_INVALID_HANDLE``, ...), ``operation`` what was called
    (``"cuEventRecord"``, ...) and ``detail`` what the package found wrong
    before calling the driver ("" when the driver itself refused). Raised by
    ``numba_cuda_launch.synchronize()``, stream and event methods in
    ``@njit`` code; :class:`CudaLaunchError` is the one launches raise.
    """

    code: int
    name: str
    operation: str
    detail: str

    def __init__(self, code: int, operation: str = "", detail: str = "") -> None:
        self._describe(code, operation, detail, operation or "a CUDA driver call")

    def _describe(self, code: int, operation: str, detail: str, subject: str) -> None:
        self.code = int(code)
        self.operation = operation
        self.detail = detail
        self.name = error_name(self.code)
        hint = _HINTS.get(self.code)
        RuntimeError.__init__(self, "%s failed: %s (%d)%s%s" % (
            subject, self.name, self.code, ": " + detail if detail else "",
            " (%s)" % hint if hint else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.code, self.operation, self.detail)


class CudaLaunchError(CudaError):
    """A kernel launch from compiled code failed.

    Raised in the caller of an ``@njit`` function (or reported as unraisable
    by a ``@cfunc``) when the driver refused the launch or could not load the
    kernel's image. ``code`` is the ``CUresult`` value, ``name`` its driver
    name, ``kernel`` the launched kernel's Python name and ``detail`` what
    the package found wrong before calling the driver ("" when the driver
    itself refused). ``what`` is ``"launch"``, or the occupancy query
    (``"max_active_blocks"``, ...) that failed.
    """

    kernel: str
    what: str

    def __init__(self, code: int, kernel: str = "", detail: str = "",
                 what: str = "launch") -> None:
        self.kernel = kernel
        self.what = what
        super().__init__(code, "%s of CUDA kernel %r" % (what, kernel), detail)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.code, self.kernel, self.detail, self.what)


class CudaGraphError(CudaLaunchError):
    """A CUDA graph operation from compiled code failed: a capture, an
    instantiation, a replay or an update (see
    :mod:`numba_cuda_launch.graphs`).

    A :class:`CudaLaunchError` (the work did not reach the GPU) with
    ``operation`` naming what failed (``"begin_capture"``,
    ``"instantiate"``, ...); ``code``, ``name`` and ``detail`` as there,
    ``kernel`` the kernel's name for an update of a recorded launch.
    """

    def __init__(self, code: int, operation: str = "", detail: str = "",
                 kernel: str = "") -> None:
        self.kernel = kernel
        self.what = "launch"
        self._describe(code, operation, detail, "CUDA graph operation %s%s" % (
            operation, " of kernel %r" % kernel if kernel else ""))

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.code, self.operation, self.detail, self.kernel)


# The first lines of the NopythonUsageErrors made lately (any thread). Numba
# copies a typing error's text into new exceptions on its way out, so the
# text, not the object, is what is found again in the error the user gets.
_HEADLINES: collections.deque[str] = collections.deque(maxlen=64)
_HEADLINES_LOCK = threading.Lock()


class _LeadsWithItsFirstLine:
    """Records the first line of the message (see :func:`leading_line`)."""

    def __init__(self, msg: object, *args: Any, **kwargs: Any) -> None:
        super().__init__(msg, *args, **kwargs)  # type: ignore[call-arg]  # a mixin of exceptions
        with _HEADLINES_LOCK:
            _HEADLINES.append(str(msg).split("\n", 1)[0].strip())


class NopythonUsageError(_LeadsWithItsFirstLine, TypingError):
    """Something of this package was used in nopython code in a way it cannot
    be (a device array's elements read on the host, say). The first line of
    the message says what; it is the first line of the error the user gets,
    before Numba's ``Failed in nopython mode pipeline`` header."""


class NopythonUnsupportedError(_LeadsWithItsFirstLine, NumbaNotImplementedError):
    """The same, found when the function is lowered rather than typed (a
    raising launch inside ``prange``, a float16 value crossing the boundary
    of a CPU function)."""


class KernelTypingError(NopythonUsageError):
    """A kernel launch in nopython code was given arguments or a launch
    configuration the kernel cannot accept."""


def called_without_configuration(name: str, device: bool) -> KernelTypingError:
    """The refusal of ``kernel(...)`` in CPU code, a kernel (or, *device*, a
    device function) called without ``[griddim, blockdim]``: what to write
    instead. One sentence for every compiler's kernels."""
    if device:
        return KernelTypingError(
            "%r is a CUDA device function (cuda.jit(device=True)): it runs only on the GPU "
            "and cannot be called from CPU code; call it from a kernel" % name)
    return KernelTypingError(
        "kernel %r is called without a launch configuration: write %s[griddim, "
        "blockdim](...) (or [griddim, blockdim, stream, sharedmem]) to launch it from CPU "
        "code" % (name, name))


def recent_headlines() -> set[str]:
    """The first lines of the :class:`NopythonUsageError` (and
    :class:`NopythonUnsupportedError`) messages made lately, any thread."""
    with _HEADLINES_LOCK:
        return set(_HEADLINES)
