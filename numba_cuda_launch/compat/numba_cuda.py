"""Every use of numba-cuda internals outside its kernels (those are read by
``kernels/numba_cuda.py``): its dispatcher type, compiling with no GPU, its
stream and array classes, and functions its kernels call. Imported only
where numba-cuda is installed (:func:`.versions.has_numba_cuda`). A
numba-cuda release that moves one of these is fixed here (the releases:
:data:`.versions.SUPPORTED`, docs/matrix.md); the replacements of
numba-cuda's own functions are installed by :mod:`.overrides`
(docs/overrides.md). Its simulator is :mod:`.simulator`'s; what any
compiler's kernels share (the target, signatures, hints) is
:mod:`.cuda_target`'s.
"""

import functools
import inspect

from numba.core import types
from numba.core.errors import TypingError

from numba_cuda_launch.compat.cuda_target import deviceless as _deviceless
from numba_cuda_launch.compat.cuda_target import hinted as _hinted
from numba_cuda_launch.compat.cuda_target import no_gpu_hint, with_toolkit_hint
from numba_cuda_launch.config import get_compute_capabilities, get_compute_capability

__all__ = [
    "CUDADispatcherType", "stream_class", "array_base_class", "array_classes",
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
        with _hinted(no_gpu_hint):
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

    from numba_cuda_launch.errors import called_without_configuration

    def get_call_type(self, context, args, kws):
        if isinstance(context, CUDATypingContext):
            return original(self, context, args, kws)
        raise called_without_configuration(self.dispatcher.py_func.__name__,
                                           bool(self.dispatcher.targetoptions.get("device")))
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
