"""Exceptions raised by kernel launches and the names of CUDA driver errors."""

from numba.core.errors import TypingError

__all__ = ["CudaLaunchError", "error_name", "KernelTypingError"]

# The driver results this package produces or commonly reports. The full list
# comes from cuda-bindings when it is installed; this table only keeps names
# readable on machines without it.
_KNOWN_NAMES = {
    0: "CUDA_SUCCESS",
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    100: "CUDA_ERROR_NO_DEVICE",
    200: "CUDA_ERROR_INVALID_IMAGE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    209: "CUDA_ERROR_NO_BINARY_FOR_GPU",
    400: "CUDA_ERROR_INVALID_HANDLE",
    500: "CUDA_ERROR_NOT_FOUND",
    701: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES",
    719: "CUDA_ERROR_LAUNCH_FAILED",
    720: "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE",
}


def error_name(status):
    """Return the CUDA driver's name for a ``CUresult`` value.

    ``error_name(0) == "CUDA_SUCCESS"``; unknown values give
    ``"CUDA_ERROR_<value>"``.
    """
    status = int(status)
    try:
        from cuda.bindings import driver as _drv

        return _drv.CUresult(status).name
    except Exception:  # cuda-bindings missing, or a value it does not know
        return _KNOWN_NAMES.get(status, "CUDA_ERROR_%d" % status)


class CudaLaunchError(RuntimeError):
    """A kernel launch from compiled code failed.

    Raised in the caller of an ``@njit`` function (or reported as unraisable
    by a ``@cfunc``) when the driver refused the launch or could not load the
    kernel's image. ``code`` is the ``CUresult`` value, ``name`` its driver
    name, ``kernel`` the launched kernel's Python name and ``detail`` what
    the package found wrong before calling the driver ("" when the driver
    itself refused).
    """

    def __init__(self, code, kernel="", detail=""):
        self.code = int(code)
        self.kernel = kernel
        self.detail = detail
        self.name = error_name(self.code)
        super().__init__(
            "launch of CUDA kernel %r failed: %s (%d)%s"
            % (kernel, self.name, self.code, ": " + detail if detail else "")
        )

    def __reduce__(self):
        return type(self), (self.code, self.kernel, self.detail)


class KernelTypingError(TypingError):
    """A kernel launch in nopython code was given arguments or a launch
    configuration the kernel cannot accept."""
