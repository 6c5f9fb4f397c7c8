"""The launchable handle of a kernel overload, for launching from your own C.

:func:`kernel_handle`: a supported way to get what ``cuLaunchKernel`` needs
for a numba-cuda or numba-cuda-mlir kernel, with the layout of its
parameters, without reaching into compiler internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from numba.core import types

from numba_cuda_launch.compat import cuda_target as _compat
from numba_cuda_launch.errors import CUDA_ERROR_NO_DEVICE, CudaLaunchError
from numba_cuda_launch.kernels import source_of
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.plan import KernelParam, plan_launch
from numba_cuda_launch.cudadrv.image import KernelImage, load_image

__all__ = ["KernelHandle", "KernelParam", "kernel_handle"]

_NO_DEVICE = ("no CUDA driver or GPU is available to load the kernel's image; "
              "KernelHandle.image and .params work without one")


@dataclass(frozen=True)
class KernelHandle:
    """A kernel overload ready to launch from C.

    ``handle`` is a ``CUkernel`` (usable as the ``CUfunction`` of
    ``cuLaunchKernel``; it launches in its stream's context, the one current
    at launch time for the default streams),
    or, for a foreign kernel another library loaded, that library's handle:
    ``handle_kind`` says which (a ``CUfunction`` launches only where its
    context is current; such a kernel has no ``image``, None).
    ``params`` lists the kernel's parameters in order (``kernelParams[i]``
    must point at ``params[i].size`` bytes). ``cooperative`` kernels need
    ``cuLaunchCooperativeKernel``.
    """

    kernel_name: str
    entry_name: str
    argtypes: tuple[Any, ...]  # Numba types
    params: tuple[KernelParam, ...]
    cooperative: bool
    image: bytes | None = field(repr=False)
    handle_kind: str = "CUkernel"
    live_handle: int = field(default=0, repr=False)

    @property
    def handle(self) -> int:
        """The ``CUkernel`` (or live ``CUfunction``) as an integer; loads the
        image on first use (with the loader compiled code uses). Raises
        :class:`CudaLaunchError` if the driver refuses it (with no driver or
        GPU: ``image`` and ``params`` need neither)."""
        if self.live_handle:
            return self.live_handle
        # (only a live handle comes without an image)
        status, kern = load_image(KernelImage(self.entry_name, cast(bytes, self.image)))
        if status != 0:
            raise CudaLaunchError(status, self.kernel_name, _NO_DEVICE if status ==
                                  CUDA_ERROR_NO_DEVICE else "", what="loading the image")
        return kern


def _argument_types(name, argtypes):
    """The tuple of Numba types *argtypes* stands for (a signature string or
    object, or a tuple/list of types); TypeError naming the kernel else."""
    what = ("kernel_handle(%r, argtypes): argtypes must be a signature such as "
            "'void(float32[::1], int64)' or a tuple of Numba types" % name)
    if isinstance(argtypes, str) or (_compat.is_signature(argtypes)
                                     and not isinstance(argtypes, (tuple, list))):
        argtypes = _compat.parse_kernel_signature(
            argtypes, "kernel_handle(%r, ...)" % name, "%s; %r does not parse" % (what, argtypes))
    elif isinstance(argtypes, types.Type):
        raise TypeError("%s, got the bare type %s (write (%s,))" % (what, argtypes, argtypes))
    if not isinstance(argtypes, (tuple, list)) or \
            not all(isinstance(t, types.Type) for t in argtypes):
        raise TypeError("%s, got %r" % (what, argtypes))
    return tuple(argtypes)


def kernel_handle(dispatcher: Any, argtypes: Any) -> KernelHandle:
    """Return the :class:`KernelHandle` of *dispatcher*'s overload for
    *argtypes* (a tuple of Numba types or a signature such as
    ``"void(float32[::1], int64)"``), compiling a lazy kernel if needed.

    The overload is chosen exactly as a launch from compiled code would
    choose it. Raises TypeError for anything else than a kernel and a
    signature or tuple of types, and KernelTypingError when the kernel
    cannot take those types."""
    try:
        source = source_of(dispatcher)
    except TypeError:
        raise TypeError("kernel_handle() needs a kernel (a @cuda.jit kernel of numba-cuda or "
                        "numba-cuda-mlir, or a foreign_kernel), got %r" % (dispatcher,)) from None
    name = source.kernel_name(dispatcher)
    if source.is_device_function(dispatcher):
        raise TypeError("kernel_handle(%r, ...): it is a CUDA device function "
                        "(cuda.jit(device=True)), which cannot be launched; kernel_handle() "
                        "takes a kernel" % name)
    argtypes = _argument_types(name, argtypes)
    if BACKEND.no_handles and BACKEND.refusal(source, dispatcher) is None:
        raise RuntimeError("kernel_handle(): %s" % BACKEND.no_handles)
    plan = plan_launch(dispatcher, argtypes, source)
    # A backend with handles plans an entry point, and an image unless the
    # kernel is live.
    return KernelHandle(
        kernel_name=name,
        entry_name=cast(str, plan.entry_name),
        argtypes=plan.argtypes,
        params=plan.params,
        cooperative=plan.cooperative,
        image=None if plan.live else cast(KernelImage, plan.image).data,
        handle_kind=plan.live[1] if plan.live else "CUkernel",
        live_handle=plan.live[0] if plan.live else 0,
    )
