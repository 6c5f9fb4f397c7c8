"""The CUDA target kernels are built for, whichever compiler builds them:
whether a GPU can be used, its compute capability or the configured one
without it, the architectures the installed toolkit builds for, kernel
signatures, and the hints a failed compilation ends with. Asked of numba-cuda
once ``numba.cuda`` is imported (its context and errors, as its kernels see
them), else of the CUDA driver and NVRTC through cuda-bindings, so that a
program using numba-cuda-mlir alone never imports ``numba.cuda``
(docs/numba-cuda-mlir.md, "numba-cuda or numba-cuda-mlir").
"""

import contextlib
import os

from numba.core import types

from numba_cuda_launch.compat.versions import has_numba_cuda, numba_cuda_imported
from numba_cuda_launch.config import get_compute_capability, setting

# Whether numba-cuda is installed (the hints name its extra). Where it is
# imported too (numba_cuda_imported), it answers (its context, its errors);
# else the driver does.
_NUMBA_CUDA = has_numba_cuda()

__all__ = [
    "gpu_available", "deviceless", "current_compute_capability", "image_target",
    "target_compute_capability", "supported_architectures", "cai_sync_enabled", "unsupported_architectures",
    "is_signature", "parse_signature", "parse_kernel_signature", "TOOLKIT_MISSING",
    "with_toolkit_hint", "hinted", "no_gpu_cause", "no_gpu_hint", "compile_failure_cause",
]


# -- the GPU ------------------------------------------------------------------------

_available = []  # [whether a GPU can be used], once known: it does not change


def _driver_call(result):
    """The values of a cuda-bindings driver call; RuntimeError naming the error."""
    from cuda.bindings import driver

    status, *values = result
    if status != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError("CUDA driver: %s" % driver.cuGetErrorName(status)[1].decode())
    return values[0] if len(values) == 1 else values


def _driver_gpu_available():
    """Whether the CUDA driver loads and sees a device (no numba-cuda)."""
    try:
        from cuda.bindings import driver

        _driver_call(driver.cuInit(0))
        return _driver_call(driver.cuDeviceGetCount()) > 0
    except Exception:  # no libcuda, no device
        return False


def gpu_available() -> bool:
    """Whether a GPU can be used in this process (numba-cuda's
    ``cuda.is_available()`` when installed: it loads NVVM too, and its
    failure names the extra that installs it)."""
    if not _available:
        if numba_cuda_imported():
            from numba import cuda

            with hinted(with_toolkit_hint):
                _available.append(cuda.is_available())
        else:
            _available.append(_driver_gpu_available())
    return _available[0]


def deviceless() -> bool:
    """True when no GPU can be used and a compute capability is configured:
    kernels are then compiled for the configured architecture."""
    # The GPU first: with one, a malformed NUMBA_CUDA_LAUNCH_CC is never read.
    return not gpu_available() and setting() is not None


def current_compute_capability():
    """The compute capability of the current device (the current context's,
    else device 0); None when there is no driver or device."""
    try:
        if numba_cuda_imported():
            from numba import cuda

            return tuple(cuda.get_current_device().compute_capability)
        from cuda.bindings import driver

        _driver_call(driver.cuInit(0))
        try:
            device = _driver_call(driver.cuCtxGetDevice())
        except RuntimeError:  # no current context
            device = _driver_call(driver.cuDeviceGet(0))
        attr = driver.CUdevice_attribute
        return tuple(_driver_call(driver.cuDeviceGetAttribute(a, device)) for a in (
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    except Exception:  # no driver, no device
        return None


def image_target():
    """What the images built now are for: the configured architectures (a
    sorted tuple), else :func:`target_compute_capability`."""
    current = setting()  # a list applies with or without a GPU
    if (current is not None and isinstance(current[0], tuple)) or not gpu_available():
        return current
    return current_compute_capability()


def target_compute_capability():
    """The architecture images are built for now: the configured one with no
    GPU, else the current device's; None when neither is known."""
    if deviceless():
        return get_compute_capability()
    return current_compute_capability()


def supported_architectures():
    """The compute capabilities the installed CUDA toolkit (NVRTC) builds
    for, sorted; None when NVRTC cannot be asked."""
    try:
        if numba_cuda_imported():
            from numba.cuda.cudadrv import nvrtc

            return tuple(sorted(tuple(cc) for cc in nvrtc.get_supported_ccs()))
        from cuda.bindings import nvrtc

        status, count = nvrtc.nvrtcGetNumSupportedArchs()
        status2, archs = nvrtc.nvrtcGetSupportedArchs()
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS or \
                status2 != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None
        return tuple(sorted(divmod(int(a), 10) for a in archs[:count]))
    except Exception:
        return None


def unsupported_architectures(ccs):
    """``(unsupported, supported)``: the compute capabilities of *ccs* that
    the installed CUDA toolkit cannot build for, and those it can;
    ``((), None)`` when NVRTC cannot be asked (the failure is reported when
    an image is built)."""
    supported = supported_architectures()
    if supported is None:
        return (), None
    return tuple(cc for cc in ccs if tuple(cc) not in supported), supported


def cai_sync_enabled() -> bool:
    """Whether a kernel's launch waits for a CUDA Array Interface argument's
    stream (``NUMBA_CUDA_ARRAY_INTERFACE_SYNC``, on by default): numba-cuda's
    setting as it is now where it is installed, else the variable."""
    if numba_cuda_imported():
        from numba.cuda import config

        return getattr(config, "CUDA_ARRAY_INTERFACE_SYNC", True)
    return os.environ.get("NUMBA_CUDA_ARRAY_INTERFACE_SYNC", "1").strip() not in ("0", "")


# -- signatures -------------------------------------------------------------------------

def _sigutils():
    # numba-cuda's parser knows its own types (bfloat16, dim3, ...); Numba's
    # parses the rest the same way.
    if numba_cuda_imported():
        from numba.cuda.core import sigutils
    else:
        from numba.core import sigutils
    return sigutils


def is_signature(obj) -> bool:
    """True for what ``cuda.jit`` takes as a signature."""
    return _sigutils().is_signature(obj)


def parse_signature(sig):
    """``(argument types, return type or None)`` of *sig*; raises what
    ``cuda.jit`` raises for a signature it refuses."""
    return _sigutils().normalize_signature(sig)


def parse_kernel_signature(sig, caller, unparsable):
    """The argument types of kernel signature *sig*. TypeError when it does
    not parse (*unparsable*, then the parser's error) or returns a value
    (*caller* names the call)."""
    try:
        argtypes, restype = parse_signature(sig)
    except Exception as exc:
        raise TypeError("%s: %s" % (unparsable, str(exc).strip() or type(exc).__name__)) \
            from None
    if restype not in (None, types.void, types.none):
        raise TypeError("%s: kernels return nothing; the signature returns %s (write void(...))"
                        % (caller, restype))
    return argtypes


# -- hints ------------------------------------------------------------------------------

@contextlib.contextmanager
def hinted(extend):
    """An exception raised inside is raised again as ``extend(exc)``, unless
    that is None; alone, since its message carries the original one (a
    chain would print the error twice)."""
    try:
        yield
    except Exception as exc:
        extended = extend(exc)
        if extended is None:
            raise
        raise extended from None


def _extended(exc, hint):
    """*exc* again with *hint* appended to its message; None if it has the
    hint already or its class takes other arguments."""
    text = str(exc)
    if hint in text:
        return None
    try:
        return type(exc)(text + hint)
    except Exception:
        return None


# What to do with no usable GPU and no compute capability configured: the end
# of an eager kernel's compile error, the first line of a launch's.
_SET_CC = "set NUMBA_CUDA_LAUNCH_CC=9.0 or call numba_cuda_launch.set_compute_capability((9, 0))"
_NO_GPU_HINT = "\n(no usable GPU: to compile kernels without one, %s)" % _SET_CC


def no_gpu_hint(exc):
    """*exc* with the no-GPU hint appended when it speaks of the driver
    (else None): for the errors of compiling with no GPU."""
    return _extended(exc, _NO_GPU_HINT) if "driver" in str(exc).lower() else None


def no_gpu_cause(exc):
    """``(what to do, text)`` of compilation error *exc*: what to do when it
    says no GPU can be used and no compute capability is configured (else
    None), and its text without the hint an eager kernel's error ends with."""
    text = str(exc)
    if get_compute_capability() is not None or "driver" not in text.lower():
        return None, text
    simulator = " or run under NUMBA_ENABLE_CUDASIM=1" if _NUMBA_CUDA else ""
    return ("no usable GPU and no architecture configured: %s to compile without one%s"
            % (_SET_CC, simulator), text.replace(_NO_GPU_HINT, ""))


#: What to do when a CUDA compiler library is missing: the first line of the
#: error (the extra of the kernel compiler installed: numba-cuda's, else
#: numba-cuda-mlir's).
TOOLKIT_MISSING = (
    "the CUDA compiler libraries (NVVM, NVRTC, nvJitLink) were not found: install them with "
    "the package's extra, pip install \"numba-cuda-launch[cu13]\", or [cu12] for a CUDA 12 "
    "driver") if _NUMBA_CUDA else (
    "the CUDA compiler libraries (NVRTC, nvJitLink) were not found: install them with the "
    "package's extra, pip install \"numba-cuda-launch[mlir]\", or [mlir-cu12] for a CUDA 12 "
    "driver")
_TOOLKIT_LIBS = ("nvvm", "nvrtc", "nvjitlink")
_NOT_FOUND = ("not found", "cannot be found", "cannot be loaded", "failure finding",
              "not available")


def _toolkit_missing(text):
    low = text.lower()
    return any(lib in low for lib in _TOOLKIT_LIBS) and any(w in low for w in _NOT_FOUND)


def with_toolkit_hint(exc):
    """*exc* again, its message starting with :data:`TOOLKIT_MISSING` (then
    the compiler's), when it says a CUDA compiler library is missing; None
    otherwise, or when it says what to install already."""
    text = str(exc)
    if TOOLKIT_MISSING in text or not _toolkit_missing(text):
        return None
    try:
        return type(exc)("%s\n%s" % (TOOLKIT_MISSING, text))
    except Exception:
        return None


def compile_failure_cause(exc):
    """``(what to do, text)`` of a kernel's compilation error *exc*: what to
    do when it failed for a missing CUDA compiler library, or for no usable
    GPU and no configured compute capability (else None), and its text
    without the hint it may carry."""
    text = str(exc)
    if _toolkit_missing(text):
        return TOOLKIT_MISSING, text.replace(TOOLKIT_MISSING + "\n", "")
    return no_gpu_cause(exc)
