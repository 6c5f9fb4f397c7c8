"""Every use of numba-cuda internals outside its kernels (those are read by
``kernels/numba_cuda.py``): its dispatcher type, signatures, the
architecture images are built for, compiling with no GPU, and the error
hints. A numba-cuda release that moves one of these is fixed here (the
releases: :data:`.versions.SUPPORTED`, docs/matrix.md); the replacements of
numba-cuda's own functions are installed by :mod:`.overrides`
(docs/overrides.md). Its simulator is :mod:`.simulator`'s.
"""

import contextlib
import functools
import inspect

from numba import cuda
from numba.core import types
from numba.core.errors import TypingError

from numba_cuda_launch.config import get_compute_capabilities, get_compute_capability, setting

__all__ = [
    "CUDADispatcherType", "is_signature", "parse_signature", "parse_kernel_signature",
    "unsupported_architectures", "image_target", "target_compute_capability", "no_gpu_cause",
    "with_toolkit_hint", "compile_failure_cause", "stream_class", "array_base_class",
    "array_classes",
    # replacements of numba-cuda's functions (installed by .overrides)
    "deviceless_get_current_device", "deviceless_ensure_cc", "deviceless_bind",
    "toolkit_hinting_kernel_init", "refusing_get_call_type",
    # functions kernels call (launch/intrinsics.py)
    "register_kernel_function", "kernel_compute_capability",
]

# numba-cuda's type of @cuda.jit dispatchers (a types.Dispatcher):
# numba.cuda.types.ext_types from 0.23 on, numba.cuda.types before.
try:
    from numba.cuda.types.ext_types import CUDADispatcher as CUDADispatcherType
except ImportError:  # numba-cuda < 0.23
    from numba.cuda.types import CUDADispatcher as CUDADispatcherType


def unsupported_architectures(ccs):
    """``(unsupported, supported)``: the compute capabilities of *ccs* that
    the installed CUDA toolkit (NVRTC) cannot build for, and those it can;
    ``((), None)`` when NVRTC cannot be asked (the failure is reported when
    an image is built)."""
    try:
        from numba.cuda.cudadrv import nvrtc

        supported = tuple(sorted(tuple(cc) for cc in nvrtc.get_supported_ccs()))
    except Exception:
        return (), None
    return tuple(cc for cc in ccs if tuple(cc) not in supported), supported


def image_target():
    """What the images built now are for: the configured architectures (a
    sorted tuple), else :func:`target_compute_capability`."""
    current = setting()  # a list applies with or without a GPU
    if (current is not None and isinstance(current[0], tuple)) or \
            not (_available[0] if _available else _gpu_available()):
        return current
    try:
        return tuple(cuda.get_current_device().compute_capability)
    except Exception:  # no driver, no device
        return None


def target_compute_capability():
    """The architecture images are built for now: the configured one with no
    GPU, else the current device's; None when neither is known."""
    if _deviceless():
        return get_compute_capability()
    try:
        return tuple(cuda.get_current_device().compute_capability)
    except Exception:  # no driver, no device
        return None


def is_signature(obj):
    """True for what ``cuda.jit`` takes as a signature."""
    from numba.cuda.core import sigutils

    return sigutils.is_signature(obj)


def parse_signature(sig):
    """``(argument types, return type or None)`` of *sig*, read by
    numba-cuda's parser, which knows numba-cuda's own types (``bfloat16``,
    ``dim3``, ...); raises what ``cuda.jit`` raises for a signature it
    refuses."""
    from numba.cuda.core import sigutils

    return sigutils.normalize_signature(sig)


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


_available = []  # [whether a GPU can be used], once known: it does not change


def _gpu_available():
    """Whether numba-cuda can use a GPU in this process."""
    if not _available:
        # is_available() loads NVVM too: its failure names the extra that
        # installs it (and is asked again next time).
        with _hinted(with_toolkit_hint):
            _available.append(cuda.is_available())
    return _available[0]


def _deviceless():
    """True when no GPU can be used and a compute capability is configured,
    the one case where the replacements below change anything."""
    # The GPU first: with one, a malformed NUMBA_CUDA_LAUNCH_CC is never read
    # and numba-cuda works exactly as without this package.
    return not _gpu_available() and setting() is not None


@contextlib.contextmanager
def _hinted(extend):
    """An exception raised inside is raised again as ``extend(exc)``, unless
    that is None; alone, since its message carries the original one (a
    chain would print the error twice)."""
    try:
        yield
    except Exception as exc:
        hinted = extend(exc)
        if hinted is None:
            raise
        raise hinted from None


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
# of numba-cuda's error for an eager kernel, the first line of a launch's.
_SET_CC = "set NUMBA_CUDA_LAUNCH_CC=9.0 or call numba_cuda_launch.set_compute_capability((9, 0))"
_NO_GPU_HINT = "\n(no usable GPU: to compile kernels without one, %s)" % _SET_CC


def _with_no_gpu_hint(exc):
    return _extended(exc, _NO_GPU_HINT) if "driver" in str(exc).lower() else None


def no_gpu_cause(exc):
    """``(what to do, text)`` of compilation error *exc*: what to do when it
    says no GPU can be used and no compute capability is configured (else
    None), and its text without the hint an eager kernel's error ends with."""
    text = str(exc)
    if get_compute_capability() is not None or "driver" not in text.lower():
        return None, text
    return ("no usable GPU and no architecture configured: %s to compile without one, or run "
            "under NUMBA_ENABLE_CUDASIM=1" % _SET_CC, text.replace(_NO_GPU_HINT, ""))


#: What to do when a CUDA compiler library is missing: the first line of the error.
TOOLKIT_MISSING = (
    "the CUDA compiler libraries (NVVM, NVRTC, nvJitLink) were not found: install them with "
    "the package's extra, pip install \"numba-cuda-launch[cu13]\", or [cu12] for a CUDA 12 "
    "driver")
_TOOLKIT_LIBS = ("nvvm", "nvrtc", "nvjitlink")
_NOT_FOUND = ("not found", "cannot be found", "cannot be loaded", "failure finding",
              "not available")


def _toolkit_missing(text):
    low = text.lower()
    return any(lib in low for lib in _TOOLKIT_LIBS) and any(w in low for w in _NOT_FOUND)


def with_toolkit_hint(exc):
    """*exc* again, its message starting with :data:`TOOLKIT_MISSING` (then
    numba-cuda's), when it says a CUDA compiler library is missing; None
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


class _ConfiguredDevice:
    """Stands in for the current device while compiling with no GPU."""

    id = -1

    @property
    def compute_capability(self):
        return get_compute_capability()


def deviceless_get_current_device(original):
    """``numba.cuda.dispatcher.get_current_device`` (read by
    ``_Kernel.__init__`` for the target architecture): the configured
    device when compiling with no GPU; otherwise *original*, whose "no
    driver" error (an eager kernel defined with no GPU) says how to compile
    without one."""
    def get_current_device():
        if _deviceless():
            return _ConfiguredDevice()
        with _hinted(_with_no_gpu_hint):
            return original()
    return get_current_device


def deviceless_ensure_cc(original):
    """``CUDACodeLibrary._ensure_cc``: PTX and cubins built without an
    explicit architecture are built for the configured one with no GPU."""
    def _ensure_cc(self, cc):
        if cc is None and _deviceless():
            return get_compute_capability()
        return original(self, cc)
    return _ensure_cc


def deviceless_bind(original):
    """``_Kernel.bind`` loads the module into a context, impossible with no
    GPU: skipped then (the image is loaded at the first launch)."""
    def bind(self):
        if _deviceless():
            return None
        return original(self)
    return bind


def toolkit_hinting_kernel_init(original):
    """``_Kernel.__init__`` (where a kernel compiles): numba-cuda's error for
    missing compiler libraries names the extra that installs them."""
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        with _hinted(with_toolkit_hint):
            original(self, *args, **kwargs)
    return __init__


def refusing_get_call_type(original):
    """``CUDADispatcher.get_call_type`` (numba-cuda's dispatcher type):
    calling a ``@cuda.jit`` object without a launch configuration in CPU code
    is a typing error saying what to write, not numba-cuda's "No definition
    for lowering"; the CUDA target's own contexts are untouched."""
    from numba.cuda.target import CUDATypingContext

    from numba_cuda_launch.errors import KernelTypingError

    def get_call_type(self, context, args, kws):
        if isinstance(context, CUDATypingContext):
            return original(self, context, args, kws)
        name = self.dispatcher.py_func.__name__
        if self.dispatcher.targetoptions.get("device"):
            raise KernelTypingError(
                "%r is a CUDA device function (cuda.jit(device=True)): it runs only "
                "on the GPU and cannot be called from CPU code; call it from a "
                "kernel" % name)
        raise KernelTypingError(
            "kernel %r is called without a launch configuration: write "
            "%s[griddim, blockdim](...) (or [griddim, blockdim, stream, "
            "sharedmem]) to launch it from CPU code" % (name, name))
    return get_call_type


def stream_class():
    """numba-cuda's stream class, or None."""
    from numba.cuda.cudadrv import driver

    return getattr(driver, "Stream", None)


def array_base_class():
    """numba-cuda's device array base class."""
    from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase

    return DeviceNDArrayBase


def array_classes():
    """numba-cuda's device array classes present."""
    from numba.cuda.cudadrv import devicearray

    return tuple(c for c in (getattr(devicearray, n, None) for n in
                             ("DeviceNDArray", "MappedNDArray", "ManagedNDArray"))
                 if c is not None)


# -- functions kernels call ---------------------------------------------------------

def register_kernel_function(fn, typer, lower):
    """Make Python function *fn* callable in numba-cuda kernels (and device
    functions): ``typer(*argtypes)`` returns its signature (or raises
    ``TypingError`` saying why not), ``lower(context, builder, sig, args)``
    emits the call. Registered as numba-cuda registers its own (``cuda.*``)
    functions, in ``cudadecl.registry`` and ``cudaimpl.registry``: every CUDA
    typing and target context installs those and reads registrations added
    later, so every kernel compiled afterwards knows *fn*."""
    from numba.cuda import cudadecl, cudaimpl
    from numba.cuda.typing.templates import AbstractTemplate

    class KernelFunction(AbstractTemplate):
        key = fn

        def generic(self, args, kws):
            if not kws:
                return typer(*args)
            # keywords as fn's signature names them, folded at the call
            try:
                bound = pysig.bind(*args, **kws)
            except TypeError as exc:
                raise TypingError("%s(): %s" % (fn.__name__, exc)) from None
            sig = typer(*bound.args)
            return sig if sig is None else sig.replace(pysig=pysig)

    pysig = inspect.signature(fn)
    cudadecl.registry.register_global(fn, types.Function(KernelFunction))
    cudaimpl.registry.lower(fn, types.VarArg(types.Any))(lower)


def kernel_compute_capability():
    """The lowest architecture the kernel being compiled is built for: the
    compute capability numba-cuda compiles it for (its flags, read while
    typing and lowering), or the lowest configured one when images are
    built for several; None outside a kernel's compilation."""
    from numba.cuda.core.targetconfig import ConfigStack

    cc = getattr(ConfigStack.top_or_none(), "compute_capability", None)
    ccs = get_compute_capabilities()
    if ccs is not None and cc is not None:
        return min(tuple(cc), ccs[0])
    return None if cc is None else tuple(cc)
