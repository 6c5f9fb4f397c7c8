"""The launchable handle of a kernel overload, for launching from your own C.

:func:`kernel_handle` answers the seed's other request: a supported way to
get what ``cuLaunchKernel`` needs for a numba-cuda kernel, with the layout of
its parameters, without reaching into numba-cuda internals.
"""

import ctypes
import threading
from dataclasses import dataclass, field

from numba.core import sigutils

from numba_cuda_launch import _compat, driver
from numba_cuda_launch.errors import CudaLaunchError
from numba_cuda_launch.image import image_for_kernel
from numba_cuda_launch.kernelcall import select_kernel
from numba_cuda_launch.params import KernelParam, param_layout

__all__ = ["KernelHandle", "KernelParam", "kernel_handle"]

_c_int = ctypes.c_int
_vp = ctypes.c_void_p
_load_data_t = ctypes.CFUNCTYPE(
    _c_int, ctypes.POINTER(_vp), ctypes.c_char_p, _vp, _vp, ctypes.c_uint, _vp, _vp, ctypes.c_uint)
_get_kernel_t = ctypes.CFUNCTYPE(_c_int, ctypes.POINTER(_vp), _vp, ctypes.c_char_p)
_init_t = ctypes.CFUNCTYPE(_c_int, ctypes.c_uint)

_loaded = {}  # image digest -> CUkernel, for the life of the process
_load_lock = threading.Lock()


@dataclass(frozen=True)
class KernelHandle:
    """A kernel overload ready to launch from C.

    ``handle`` is a ``CUkernel`` (usable as the ``CUfunction`` of
    ``cuLaunchKernel``; it launches in the context current at launch time).
    ``params`` lists the kernel's parameters in order (``kernelParams[i]``
    must point at ``params[i].size`` bytes). ``cooperative`` kernels need
    ``cuLaunchCooperativeKernel``.
    """

    kernel_name: str
    entry_name: str
    argtypes: tuple
    params: tuple
    cooperative: bool
    image: bytes = field(repr=False)
    _digest: str = field(repr=False, default="")

    @property
    def handle(self):
        """The ``CUkernel`` as an integer; loads the image on first use.
        Raises :class:`CudaLaunchError` if the driver refuses it."""
        with _load_lock:
            kern = _loaded.get(self._digest)
            if kern is None:
                kern = _load(self.image, self.entry_name, self.kernel_name)
                _loaded[self._digest] = kern
        return kern


def _load(image, entry_name, kernel_name):
    table = driver.current_functions()
    status = _init_t(table["cuInit"])(0)
    lib, kern = _vp(), _vp()
    if status == 0:
        status = _load_data_t(table["cuLibraryLoadData"])(
            ctypes.byref(lib), image, None, None, 0, None, None, 0)
    if status == 0:
        status = _get_kernel_t(table["cuLibraryGetKernel"])(
            ctypes.byref(kern), lib, entry_name.encode())
    if status != 0:
        raise CudaLaunchError(status, kernel_name)
    return kern.value


def kernel_handle(dispatcher, argtypes):
    """Return the :class:`KernelHandle` of *dispatcher*'s overload for
    *argtypes* (a tuple of Numba types or a signature such as
    ``"void(float32[::1], int64)"``), compiling a lazy kernel if needed.

    The overload is chosen exactly as a launch from compiled code would
    choose it."""
    if isinstance(argtypes, (str, sigutils.typing.Signature)):
        argtypes, _ = sigutils.normalize_signature(argtypes)
    if not _compat.is_kernel_dispatcher(dispatcher):
        raise TypeError("kernel_handle() needs a @cuda.jit kernel, got %r" % (dispatcher,))
    if _compat.is_simulated(dispatcher):
        raise RuntimeError("kernel_handle(): under the CUDA simulator (NUMBA_ENABLE_CUDASIM=1) "
                           "kernels run as Python and have no image or driver handle")
    selection = select_kernel(dispatcher, tuple(argtypes))
    kernel = selection.kernel
    image = image_for_kernel(kernel)
    from numba.core.registry import cpu_target

    layout = param_layout(
        _compat.dispatcher_param_names(dispatcher),
        selection.argtypes,
        _compat.kernel_param_llvm_types(kernel),
        cpu_target.target_context.target_data,
    )
    return KernelHandle(
        kernel_name=_compat.dispatcher_name(dispatcher),
        entry_name=image.entry_name,
        argtypes=selection.argtypes,
        params=layout,
        cooperative=_compat.kernel_is_cooperative(kernel),
        image=image.data,
        _digest=image.digest,
    )
