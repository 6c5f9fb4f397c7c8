"""Layer 1.5, kernels: the compilers whose kernels ``kernel[...]`` launches
from CPU code, one module per source (its CPU type, ``typeof``, the reading
of its kernel objects and its :class:`KernelSource`), as awkward-array keeps
one concept's type, model and lowering together: :mod:`.numba_cuda`,
:mod:`.numba_cuda_mlir`, :mod:`.foreign` (cubin/PTX/fatbin, cuda.core, CuPy,
Triton); the simulator's kernels are its backend's; what the two
``@cuda.jit`` dispatcher sources share is :class:`DispatcherKernels`. A
launch asks a source once, when its plan is made (``launch/plan.py``). docs/architecture.md,
"Kernel sources".
"""

import abc
import inspect
import weakref
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Dict, List, Optional, Sequence, Tuple

from numba.core import types
from numba.core.datamodel import models
from numba.core.imputils import lower_constant
from numba.extending import NativeValue, register_model, unbox

from numba_cuda_launch.compat.cuda_target import target_compute_capability, \
    unsupported_architectures
from numba_cuda_launch.config import get_compute_capabilities
from numba_cuda_launch.cudadrv.fatbin import build_fatbin

__all__ = ["KernelSource", "KernelType", "KernelFunction", "CONDITION_MAX", "SOURCES",
           "register", "source_of", "on_register", "AnyKernelType", "SOURCE_OF_NUMBA_TYPE",
           "DispatcherKernels", "flat_param_names", "image_for_architectures"]


#: What ``set_conditional`` stores for a value outside 0..2**32-1: true, and
#: no SWITCH case (a wrapped value could be either).
CONDITION_MAX = 2**32 - 1


@dataclass(frozen=True)
class KernelFunction:
    """A function kernels call (``launch/intrinsics.py``), which each source
    makes callable in its kernels (:meth:`KernelSource.add_kernel_functions`).
    ``check(cc, *argtypes)`` raises saying why a call is refused (CPU types,
    which a source translates its own to; *cc*: the lowest architecture the
    kernel is built for, or None). With an *instruction*, the function takes
    no arguments, returns nothing and is that PTX instruction, with a memory
    clobber (no load or store moves across it); without, it is
    ``set_conditional(handle, value)``: ``cudaGraphSetConditional`` of a
    64-bit handle (an integer, or a value whose type names its
    ``kernel_integer``: a struct of that one integer) and of an integer or
    boolean value, stored as an unsigned 32-bit condition, a value outside
    0..2**32-1 as :data:`CONDITION_MAX`."""

    fn: Callable[..., Any]
    check: Callable[..., None]
    instruction: Optional[str] = None


class KernelSource:
    """What the launch path asks of one kernel compiler (a source), with
    the defaults of the attributes marked so: a kernel object *d* is what
    the user launches (a dispatcher), an overload *k* what it compiles to.
    docs/architecture.md lists every attribute."""

    #: the compiler's name, for messages
    name: ClassVar[str] = "kernel source"
    #: the Numba type class of its kernel objects where Numba types them
    #: itself (numba-cuda's dispatcher type); None (the default): a
    #: :class:`KernelType` subclass of this module
    numba_type: ClassVar[Optional[type]] = None

    def claims(self, obj: Any) -> bool:
        """True for a kernel object of this compiler."""
        raise NotImplementedError

    def kernel_name(self, d: Any) -> str:
        raise NotImplementedError

    def qualified_name(self, d: Any) -> str:
        """A stable ``module.qualname``-like name (``jax_kernel``'s FFI targets)."""
        raise NotImplementedError

    def parameters(self, d: Any) -> List[inspect.Parameter]:
        raise NotImplementedError

    def param_names(self, d: Any) -> List[str]:
        """The parameters a caller gives (default: all of them)."""
        return [p.name for p in self.parameters(d)]

    def is_device_function(self, d: Any) -> bool:
        return False

    def compiled_kernels(self, d: Any) -> Dict[Tuple[types.Type, ...], Any]:
        """``{CPU argument types: overload}`` compiled so far."""
        raise NotImplementedError

    def can_compile(self, d: Any) -> bool:
        """Lazy (True) or eager (False, the default)."""
        return False

    def compile(self, d: Any, argtypes: Tuple[types.Type, ...]) -> Any:
        """The overload for *argtypes*, compiled or cached as a Python launch
        would (asked only when :meth:`can_compile`)."""
        raise NotImplementedError

    def argument_problem(self, ty: types.Type) -> Optional[str]:
        """Why this compiler cannot take an argument of CPU type *ty*."""
        return None

    def lazy_problem(self, d: Any, problem: str) -> str:
        """*problem* (why lazily compiled *d* cannot take an argument), with
        what this source knows of why *d* is lazy (default: as it is)."""
        return problem

    def launch_problems(self, d: Any, k: Any) -> List[str]:
        """Why overload *k* cannot be launched from compiled code."""
        return []

    def python_classes(self) -> Tuple[Tuple[type, ...], Tuple[type, ...], Tuple[type, ...]]:
        """``(stream classes, device array base classes, device array classes
        read by exact class)`` of this compiler's Python API, which the
        launch backend types and reads directly (default: none; any
        library's are read through ``__cuda_stream__``, CAI and DLPack)."""
        return (), (), ()

    def add_kernel_functions(self, functions: Sequence[KernelFunction]) -> None:
        """Make *functions* callable in this compiler's kernels (default:
        nothing to do, its kernels are compiled elsewhere)."""

    def simulation_refusal(self, d: Any) -> str:
        """What this kernel is, saying why numba-cuda's simulator cannot run it."""
        return "%s kernels are not simulated" % self.name

    # -- what a driver launch takes ------------------------------------------------

    def entry_name(self, k: Any) -> str:
        raise NotImplementedError

    def image(self, k: Any) -> bytes:
        """The overload's image (bytes); raises :class:`ImageError` saying why
        it cannot be built."""
        raise NotImplementedError

    def live_handle(self, k: Any) -> Optional[Tuple[int, str]]:
        """``(address, "CUkernel" or "CUfunction")`` of an overload another
        library loaded, launched as it is (default: None, an image)."""
        return None

    def cooperative(self, k: Any) -> bool:
        return False

    def dependent(self, k: Any) -> bool:
        """Whether every launch of *k* must be a programmatic dependent one
        (default: no; each launch says, ``cfg.dependent()``)."""
        return False

    def param_types(self, k: Any) -> Sequence[Any]:
        """The LLVM types of the entry point's parameters, in order."""
        raise NotImplementedError

    def flat_param_names(self, name: str, ty: types.Type) -> List[str]:
        """The names of the parameters one argument becomes (default: one)."""
        return [name]

    def flatten(self, context, builder, argtypes: Sequence[types.Type], values) -> list:
        """The LLVM values of the entry point's parameters, for argument
        *values* of the overload's *argtypes*."""
        raise NotImplementedError

    #: ``emit_argument_checks(context, builder, guards, ty, value, where)``:
    #: refuse (``guards.check``) argument values this compiler's parameters
    #: cannot express; None (the default) when there are none to refuse.
    emit_argument_checks = None


class ImageError(Exception):
    """A kernel image could not be built; the message says why."""


class KernelType(types.Type):
    """The CPU type of a kernel Numba does not type itself; like numba-cuda's
    dispatcher type it holds the kernel (``.dispatcher``), and its class
    names the :class:`KernelSource` (``source``). A value carries nothing at
    run time: the kernel is known from the type (an opaque model, registered
    for every subclass)."""

    source: ClassVar[KernelSource]
    #: the kernel: an instance attribute, so Numba's hashing and comparing of
    #: types calls no Python property
    key: Any = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        register_model(cls)(models.OpaqueModel)

    def __init__(self, dispatcher, name):
        self.dispatcher = self.key = dispatcher
        super().__init__(name=name)


@lower_constant(KernelType)
def _no_value(context, builder, ty, pyval):
    return context.get_dummy_value()


@unbox(KernelType)
def _unbox_kernel(typ, obj, c):
    # The type is the kernel (its key): a kernel passed in carries no data.
    return NativeValue(c.context.get_dummy_value())


class AnyKernelType(abc.ABC):
    """Virtual base class of the Numba types of kernels ``kernel[...]``
    configures: :class:`KernelType` and the Numba type classes of the
    registered sources (``isinstance(ty, AnyKernelType)``, for sources
    registered later too)."""


AnyKernelType.register(KernelType)

#: The kernel sources, asked in order which one a kernel object belongs to.
SOURCES: List[KernelSource] = []
#: The sources whose kernels Numba types itself, by their Numba type class.
SOURCE_OF_NUMBA_TYPE: Dict[type, KernelSource] = {}
_LISTENERS: List[Callable[[KernelSource], None]] = []


def register(source: KernelSource, first: bool = False) -> KernelSource:
    """Add *source* (asked first if *first*), and tell the
    :func:`on_register` callbacks; if one fails, the source is taken out
    again (no kernel is claimed by a source half set up) and the error
    raised."""
    SOURCES.insert(0, source) if first else SOURCES.append(source)
    if source.numba_type is not None:
        SOURCE_OF_NUMBA_TYPE[source.numba_type] = source
        AnyKernelType.register(source.numba_type)
    try:
        for listener in _LISTENERS:
            listener(source)
    except BaseException:
        SOURCES.remove(source)
        SOURCE_OF_NUMBA_TYPE.pop(source.numba_type, None)
        raise
    return source


def on_register(listener: Callable[[KernelSource], None]) -> None:
    """Call *listener* with each registered source, now and as sources are
    registered: a compiler's source is registered when the compiler is
    imported (``kernels/installed.py``), which may be after the launch
    layer's modules are."""
    _LISTENERS.append(listener)
    for source in list(SOURCES):
        listener(source)


def source_of(obj: Any) -> KernelSource:
    """The source *obj* (a kernel object) belongs to; TypeError else."""
    for source in SOURCES:
        if source.claims(obj):
            return source
    raise TypeError("%r is not a kernel of %s" % (obj, " or ".join(s.name for s in SOURCES)))


# -- what the sources of @cuda.jit dispatchers share --------------------------------------
# numba-cuda's and numba-cuda-mlir's keep the Python function, options and
# laziness alike; an image for several architectures is a fatbin of a cubin
# for each and the lowest one's PTX (docs/architecture.md, "Images for
# several architectures"). Neither compiler is imported here.

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

