"""What the sources of ``@cuda.jit`` dispatchers share (numba-cuda's and
numba-cuda-mlir's keep the Python function, options and laziness alike):
names and parameters, laziness, the names of flattened parameters, and an
image for several architectures (a fatbin of a cubin for each and the
lowest one's PTX, docs/architecture.md "Images for several architectures").
Neither compiler is imported here.
"""

import inspect
import weakref
from typing import Any, Callable, List

from numba.core import types

from numba_cuda_launch.compat.cuda_target import target_compute_capability, \
    unsupported_architectures
from numba_cuda_launch.config import get_compute_capabilities
from numba_cuda_launch.cudadrv.fatbin import build_fatbin
from numba_cuda_launch.kernels import ImageError, KernelSource

__all__ = ["DispatcherKernels", "flat_param_names", "image_for_architectures"]


_fatbins: "weakref.WeakKeyDictionary[Any, dict]" = weakref.WeakKeyDictionary()


def image_for_architectures(kernel, cubin: Callable[[Any], bytes],
                            ptx: Callable[[Any], str]) -> bytes:
    """The image of overload *kernel*: ``cubin(None)`` (the target
    architecture's) or, with a list of architectures configured, a fatbin of
    ``cubin(cc)`` for each and ``ptx(lowest)``, built once per overload and
    list; :class:`ImageError` saying why it cannot be built."""
    ccs = get_compute_capabilities()
    if ccs is None:
        try:
            return cubin(None)
        except Exception as exc:
            raise ImageError(
                "building its cubin for compute capability %s failed (is that architecture "
                "supported by the installed CUDA toolkit?):\n%s"
                % (target_compute_capability(), exc)) from exc
    known = _fatbins.setdefault(kernel, {})
    if ccs in known:
        return known[ccs]
    bad, supported = unsupported_architectures(ccs)
    if bad:  # a compiler would build the nearest older one under the wrong name
        raise ImageError(
            "the installed CUDA toolkit does not build for compute capability %s "
            "(NUMBA_CUDA_LAUNCH_CC; it builds for %s)" % (
                ", ".join("%d.%d" % c for c in bad), ", ".join("%d.%d" % c for c in supported)))
    # the PTX first: code it cannot hold is the reason a list fails (a cubin
    # build may fail on it too, with the linker's words)
    try:
        lowest_ptx = ptx(ccs[0])
    except Exception as exc:
        why = exc if isinstance(exc, ValueError) else "building it failed:\n%s" % exc
        raise ImageError("its image for several architectures needs the PTX of compute "
                         "capability %d.%d, for newer GPUs, and %s" % (*ccs[0], why)) from exc
    cubins = {}
    for cc in ccs:
        try:
            cubins[cc] = cubin(cc)
        except Exception as exc:
            raise ImageError("building its cubin for compute capability %d.%d failed (is that "
                             "architecture supported by the installed CUDA toolkit?):\n%s"
                             % (*cc, exc)) from exc
    known[ccs] = build_fatbin(cubins, (ccs[0], lowest_ptx))
    return known[ccs]


def flat_param_names(name, ty, array_fields=("meminfo", "parent", "nitems", "itemsize", "data"),
                     complex_parts=("real", "imag")) -> List[str]:
    """Names of the kernel parameters one argument of type *ty* becomes: an
    array's *array_fields*, shape[ndim] and strides[ndim]; a complex number
    its *complex_parts* (none: one parameter); a tuple its items. The
    defaults are numba-cuda's ABI (``_Kernel._prepare_args``)."""
    if isinstance(ty, types.Array):
        fields = list(array_fields)
        fields += ["shape[%d]" % i for i in range(ty.ndim)]
        fields += ["strides[%d]" % i for i in range(ty.ndim)]
        return ["%s.%s" % (name, f) for f in fields]
    if isinstance(ty, types.Complex) and complex_parts:
        return ["%s.%s" % (name, part) for part in complex_parts]
    if isinstance(ty, types.BaseTuple):
        return [n for i, t in enumerate(ty)
                for n in flat_param_names("%s[%d]" % (name, i), t, array_fields, complex_parts)]
    return [name]


class DispatcherKernels(KernelSource):
    """What the sources of ``@cuda.jit`` dispatchers (numba-cuda's and
    numba-cuda-mlir's, which keep the Python function, options and laziness
    alike) share."""

    def kernel_name(self, dispatcher) -> str:
        return dispatcher.py_func.__name__

    def qualified_name(self, dispatcher) -> str:
        fn = dispatcher.py_func
        return "%s.%s" % (getattr(fn, "__module__", None) or "_", fn.__qualname__)

    def parameters(self, dispatcher) -> List[inspect.Parameter]:
        return list(inspect.signature(dispatcher.py_func).parameters.values())

    def is_device_function(self, dispatcher) -> bool:
        return bool(dispatcher.targetoptions.get("device"))

    def can_compile(self, dispatcher) -> bool:
        """False for eagerly compiled kernels (``@cuda.jit(signature)``)."""
        return bool(dispatcher._can_compile)

    def compiled_kernels(self, dispatcher):
        return dict(dispatcher.overloads)

    def compile(self, dispatcher, argtypes) -> Any:
        """The kernel for *argtypes*, compiled or taken from the dispatcher's
        caches as a Python launch would."""
        return dispatcher.compile(tuple(argtypes))
