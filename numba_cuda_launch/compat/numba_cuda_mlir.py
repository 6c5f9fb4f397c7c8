"""numba-cuda-mlir internals this package uses: with no GPU, the compute
capability its compiler asks for (installed by :mod:`.overrides`); its
extension API (``numba_cuda_mlir.extending``, ``cuda.declare_device``) for
the functions kernels call. Its kernels are read by
``kernels/numba_cuda_mlir.py``. Nothing here imports numba_cuda_mlir: it is
used once the user imported it (:mod:`.import_hooks`;
docs/numba-cuda-mlir.md).
"""

import sys
from typing import Callable, List

from numba_cuda_launch.compat.cuda_target import gpu_available
from numba_cuda_launch.config import get_compute_capabilities, get_compute_capability

__all__ = ["deviceless_cc_wanted", "configured_cc", "extend",
           "registering_load_additional_registries", "overload", "declare_device",
           "register_asm_function", "kernel_compute_capability"]


def deviceless_cc_wanted():
    """Whether numba-cuda-mlir is imported and should compile for the
    configured compute capability (no GPU, one configured)."""
    if "numba_cuda_mlir" not in sys.modules:
        return False
    try:
        cc = get_compute_capability()
    except ValueError:
        return False  # a malformed setting is reported where a kernel is compiled
    if cc is None:
        return False
    return not gpu_available()


def configured_cc(original):
    """The value for ``numba_cuda_mlir.tools._cached_cc`` with no GPU: the
    configured compute capability, unless something filled that cache
    already (numba-cuda-mlir asks it for the device's on every compilation;
    docs/numba-cuda-mlir.md)."""
    if original is not None:
        return original
    return tuple(get_compute_capability())


# -- when its typing context is made ----------------------------------------------------

_EXTENSIONS: List[Callable[[], None]] = []  # registrations, run once each
_REGISTERED: List[Callable[[], None]] = []


def _register_extensions():
    for register in _EXTENSIONS:
        if register not in _REGISTERED:
            _REGISTERED.append(register)
            register()


def registering_load_additional_registries(original):
    """``MLIRTypingContext.load_additional_registries`` (run when
    numba-cuda-mlir makes its typing context, before its first compilation):
    the package's extensions are registered first, so that they are in the
    registries installed then. Making the contexts costs ~0.6 s: done by
    numba-cuda-mlir when it first needs them, not at import."""
    def load_additional_registries(self):
        _register_extensions()
        return original(self)
    return load_additional_registries


def extend(register: Callable[[], None]) -> None:
    """Run *register* (it adds to numba-cuda-mlir's extension registries)
    when numba-cuda-mlir makes its typing context, or now (then refreshing
    the contexts) if it has made it already."""
    _EXTENSIONS.append(register)
    descriptor = sys.modules.get("numba_cuda_mlir.descriptor")
    target = getattr(descriptor, "mlir_target", None)
    if target is not None and getattr(target, "_typingctx_initialized", True):
        from numba_cuda_mlir import extending

        _register_extensions()
        extending.refresh_registries(typing=True, target=True, include_uninitialized_cuda=False)


# -- functions kernels call ---------------------------------------------------------

def overload(fn):
    """``numba_cuda_mlir.extending.overload`` of *fn* into its extension
    typing registry, which every numba-cuda-mlir typing context installs:
    ``overload(fn)(typer)``; *typer* gets numba-cuda-mlir's types."""
    from numba_cuda_mlir import extending

    # (its refresh of the typing context returns at once while the context
    # is being made, when extend() runs these registrations)
    return extending.overload(fn, typing_registry=extending.typing_registry)


def declare_device(name, sig):
    """A C-ABI device function *name* of signature *sig* callable in
    numba-cuda-mlir kernels (``cuda.declare_device``) that the driver
    provides (``cudaGraphSetConditional``, a builtin ptxas resolves)."""
    from numba_cuda_mlir import cuda

    return cuda.declare_device(name, sig, abi="c")


def register_asm_function(fn, typer, asm):
    """Make *fn* (no arguments, no result) callable in numba-cuda-mlir
    kernels as the PTX instruction *asm* with a memory clobber (no load or
    store moves across it); ``typer()`` runs when a kernel's call is typed
    and raises to refuse it. Typed in its extension registry, lowered as an
    ``llvm.inline_asm`` operation in its extension lowering registry."""
    from numba_cuda_mlir import extending, types
    from numba_cuda_mlir._mlir.dialects import llvm

    @extending.type_callable(fn, typing_registry=extending.typing_registry)
    def _type(context):
        def typing(*args):
            typer(*args)
            return types.void
        return typing

    @extending.lower_builtin(fn)
    def _lower(builder, target, args, kwargs):
        llvm.inline_asm(None, [], asm, "~{memory}", has_side_effects=True)
        builder.store_var(target, None)


def kernel_compute_capability():
    """The lowest architecture the numba-cuda-mlir kernel being compiled is
    built for: the device's, or with no GPU the configured one; the lowest
    configured one when images are built for several."""
    cc = tuple(sys.modules["numba_cuda_mlir.tools"].get_gpu_compute_capability(tuple))
    ccs = get_compute_capabilities()
    return cc if ccs is None else min(cc, ccs[0])


