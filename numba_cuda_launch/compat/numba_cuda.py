"""Every use of numba-cuda internals, in one place: the adapter of its kernels
(:data:`KERNELS`), compiling with no GPU, and the signatures of the CUDA
simulator's kernels. A numba-cuda release that moves one of these is fixed
here and nowhere else (the releases: :data:`.versions.SUPPORTED`,
docs/matrix.md); the replacements of numba-cuda's own functions are installed
by :mod:`.overrides` (docs/overrides.md).
"""

import contextlib
import functools
import inspect
import re
import warnings
import weakref

from numba import cuda
from numba.core import types

from numba_cuda_launch.config import get_compute_capabilities, get_compute_capability

__all__ = [
    # the adapter and what it is made of
    "KERNELS", "KernelAdapter", "DispatcherKernels", "CUDADispatcherType", "kernel_cubin",
    "kernel_is_cooperative", "unsupported_kernel_features", "flat_param_names", "flatten_value",
    # signatures, architectures, errors
    "is_signature", "parse_signature", "parse_kernel_signature", "unsupported_architectures",
    "image_target", "target_compute_capability", "no_gpu_cause", "with_toolkit_hint",
    "LAUNCHABLE_SCALARS", "lazy_argument_problem",
    # replacements of numba-cuda's functions (installed by .overrides)
    "deviceless_get_current_device", "deviceless_ensure_cc", "deviceless_bind",
    "toolkit_hinting_kernel_init", "refusing_get_call_type", "signature_recording_jit",
    # the simulator, streams and device arrays
    "simulator_enabled", "is_simulated", "simulator_refusal", "simulator_numba_spelling",
    "stream_classes", "is_simulator_stream", "numba_cuda_array_classes",
]

# numba-cuda's type of @cuda.jit dispatchers (a types.Dispatcher):
# numba.cuda.types.ext_types from 0.23 on, numba.cuda.types before.
try:
    from numba.cuda.types.ext_types import CUDADispatcher as CUDADispatcherType
except ImportError:  # numba-cuda < 0.23
    from numba.cuda.types import CUDADispatcher as CUDADispatcherType


def simulator_enabled():
    """True when numba-cuda's CUDA simulator replaces the CUDA target."""
    return bool(getattr(cuda, "config", None) and cuda.config.ENABLE_CUDASIM)


def is_simulated(obj):
    """True for a kernel of numba-cuda's CUDA simulator."""
    if not simulator_enabled():
        return False
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return isinstance(obj, FakeCUDAKernel)


def _py_func(dispatcher):
    return dispatcher.fn if is_simulated(dispatcher) else dispatcher.py_func


def kernel_cubin(kernel, cc=None):
    """The linked cubin of *kernel* (bytes) for compute capability *cc*
    (``sm_XY``, never ``sm_XYa``), or by default for the current device (with
    no GPU the configured architecture). numba-cuda caches it, so a Python
    launch does not link it again; a failed link raises."""
    obj = kernel._codelibrary.get_cubin(cc=None if cc is None else tuple(cc))
    return bytes(getattr(obj, "code", obj))


def kernel_ptx(kernel, cc):
    """The PTX of *kernel* for *cc*, complete (the driver compiles it with
    nothing to link): NVVM's output for a kernel that links no files, the
    LTO-linked PTX for one that links files through nvJitLink. Raises
    ValueError when code it links cannot be part of PTX."""
    library = kernel._codelibrary
    cc = tuple(cc)
    linked = bool(library._linking_files) or library.needs_cudadevrt
    if not linked:
        ptx = library.get_asm_str(cc=cc)
    elif library._lto:
        with warnings.catch_warnings():
            # a file nvJitLink cannot take is left out: reported below as
            # the functions the PTX lacks
            warnings.filterwarnings("ignore", "Not adding .* not optimizable at link time")
            ptx = library.get_lto_ptx(cc=cc)
    else:
        raise ValueError("it links files without link-time optimization, so no PTX holds "
                         "all of its code")
    externs = sorted(set(_PTX_EXTERN.findall(ptx)) - _PTX_SYSTEM_CALLS)
    if externs:
        raise ValueError("its PTX calls functions it links from other files (%s), which the "
                         "driver cannot link when it compiles PTX" % ", ".join(externs))
    return ptx


# A function the PTX declares but does not define; the PTX system calls are
# the driver's own.
_PTX_EXTERN = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$]+)", re.M)
_PTX_SYSTEM_CALLS = frozenset({"vprintf", "malloc", "free", "__assertfail"})


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
    ccs = get_compute_capabilities()
    return ccs if ccs is not None else target_compute_capability()


def target_compute_capability():
    """The architecture images are built for now: the configured one with no
    GPU, else the current device's; None when neither is known."""
    if _deviceless():
        return get_compute_capability()
    try:
        return tuple(cuda.get_current_device().compute_capability)
    except Exception:  # no driver, no device
        return None


def kernel_is_cooperative(kernel):
    return bool(kernel.cooperative)


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
        raise TypeError("%s: %s" % (unparsable, exc)) from None
    if restype not in (None, types.void, types.none):
        raise TypeError("%s: kernels return nothing; the signature returns %s (write void(...))"
                        % (caller, restype))
    return argtypes


def unsupported_kernel_features(kernel):
    """Reasons this kernel cannot be launched from compiled code, if any."""
    reasons = []
    if is_simulated(kernel):
        problem = _SIMULATED_SIGNATURES.get(kernel)
        if isinstance(problem, tuple):
            # The simulator accepts any signature; on a GPU cuda.jit would
            # have refused this one.
            reasons.append("cuda.jit refuses its signature %s on a GPU (%s)" % problem)
        return reasons
    if kernel.debug:
        reasons.append(
            "it was compiled with debug=True, whose device-side exceptions "
            "numba-cuda reads back from module globals after each Python "
            "launch; compile it without debug=True (or launch it from Python)")
    if getattr(kernel, "launch_config_sensitive", False):
        reasons.append(
            "its code depends on the launch configuration (a launch-config-"
            "sensitive kernel), which compiled code only knows at run time")
    if any(not _harmless_setup(f) for f in kernel._codelibrary._setup_functions):
        reasons.append(
            "it links code with module setup callbacks, which only "
            "numba-cuda's own module loader runs")
    if getattr(kernel, "shared_memory_carveout", None) is not None:
        reasons.append(
            "it sets shared_memory_carveout, a per-device function attribute "
            "only numba-cuda's Python launch applies")
    return reasons


def _harmless_setup(fn):
    # numba-cuda's float16 setup callback only warns when nvJitLink is
    # missing; it does not touch the module.
    return (getattr(fn, "__name__", "") == "lto_warning_callback"
            and getattr(fn, "__module__", "").startswith("numba.cuda"))


def _image_problem(kernel):
    """Why *kernel*'s image cannot be built (the link error), or None. With a
    list of architectures configured: each one's cubin, and the PTX of the
    lowest."""
    ccs = get_compute_capabilities()
    bad, supported = unsupported_architectures(ccs) if ccs else ((), None)
    if bad:  # numba-cuda would build the nearest older one under the wrong name
        return ("the installed CUDA toolkit does not build for compute capability %s "
                "(NUMBA_CUDA_LAUNCH_CC; it builds for %s)" % (
                    ", ".join("%d.%d" % c for c in bad),
                    ", ".join("%d.%d" % c for c in supported)))
    # the PTX first: code it cannot hold is the reason a list fails (a
    # cubin build may fail on it too, with the linker's words)
    if ccs is not None:
        try:
            kernel_ptx(kernel, ccs[0])
        except Exception as exc:
            why = exc if isinstance(exc, ValueError) else "building it failed:\n%s" % exc
            return ("its image for several architectures needs the PTX of compute "
                    "capability %d.%d, for newer GPUs, and %s" % (*ccs[0], why))
    for cc in ccs or (None,):
        try:
            kernel_cubin(kernel, cc)
        except Exception as exc:
            return ("building its cubin for compute capability %s failed (is that "
                    "architecture supported by the installed CUDA toolkit?):\n%s"
                    % (cc or target_compute_capability(), exc))
    return None


def flat_param_names(name, ty, array_fields=("meminfo", "parent", "nitems", "itemsize", "data"),
                     complex_parts=("real", "imag")):
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


def flatten_value(context, builder, ty, value):
    """The LLVM values of the kernel parameters one argument becomes: CPU
    data models flatten as numba-cuda's ABI does; a float16 is its two bytes
    (its bits converted from a CPU number, or a ``half`` read from memory)."""
    if ty == types.float16:
        return [value]
    return context.get_arg_packer([ty]).as_arguments(builder, [value])


class KernelAdapter:
    """The defaults of a kernel-compiler adapter (docs/architecture.md lists
    what one provides): not simulated, no device functions, nothing to
    compile, no refusals, plain launches of an image with one parameter per
    argument."""

    @staticmethod
    def is_simulated(kernel):
        return False

    @staticmethod
    def is_device_function(kernel):
        return False

    @staticmethod
    def can_compile(kernel):
        return False

    @staticmethod
    def argument_problem(ty):
        return None

    @staticmethod
    def unavailable(kernel):
        return None

    @staticmethod
    def launch_problems(dispatcher, kernel):
        return []

    @staticmethod
    def cooperative(kernel):
        return False

    @staticmethod
    def live_handle(kernel):
        return None

    @staticmethod
    def flat_param_names(name, ty):
        return [name]

    @staticmethod
    def emit_argument_checks(context, builder, guards, ty, value, where):
        pass


class DispatcherKernels(KernelAdapter):
    """What the adapters of ``@cuda.jit`` dispatchers (numba-cuda's and
    numba-cuda-mlir's, which keep the Python function, options and laziness
    alike) share."""

    is_simulated = staticmethod(is_simulated)

    @staticmethod
    def kernel_name(dispatcher):
        return _py_func(dispatcher).__name__

    @staticmethod
    def qualified_name(dispatcher):
        fn = _py_func(dispatcher)
        return "%s.%s" % (getattr(fn, "__module__", None) or "_", fn.__qualname__)

    @staticmethod
    def parameters(dispatcher):
        return list(inspect.signature(_py_func(dispatcher)).parameters.values())

    @classmethod
    def param_names(cls, dispatcher):
        return [p.name for p in cls.parameters(dispatcher)]

    @staticmethod
    def is_device_function(dispatcher):
        if is_simulated(dispatcher):
            return bool(dispatcher._device)
        return bool(dispatcher.targetoptions.get("device"))

    @staticmethod
    def can_compile(dispatcher):
        """False for eagerly compiled kernels (``@cuda.jit(signature)``)."""
        if is_simulated(dispatcher):
            return not _simulated_signatures(dispatcher)
        return bool(dispatcher._can_compile)


class NumbaCudaKernels(DispatcherKernels):
    """The adapter of numba-cuda's ``@cuda.jit`` kernels (its simulator's
    included)."""

    name = "numba-cuda"
    image = staticmethod(kernel_cubin)
    cubin_for = staticmethod(kernel_cubin)
    ptx_for = staticmethod(kernel_ptx)
    cooperative = staticmethod(kernel_is_cooperative)
    flat_param_names = staticmethod(flat_param_names)
    flatten = staticmethod(flatten_value)

    @staticmethod
    def claims(obj):
        from numba.cuda.dispatcher import CUDADispatcher

        return is_simulated(obj) or isinstance(obj, CUDADispatcher)

    @staticmethod
    def owns(kernel):
        from numba.cuda.dispatcher import _Kernel

        return not is_simulated(kernel) and isinstance(kernel, _Kernel)

    @staticmethod
    def compiled_kernels(dispatcher):
        """{argument types: kernel} compiled so far; a simulated kernel has
        the signatures it was declared with (:func:`signature_recording_jit`)."""
        if is_simulated(dispatcher):
            return {sig: dispatcher for sig in _simulated_signatures(dispatcher)}
        return dict(dispatcher.overloads)

    @staticmethod
    def compile(dispatcher, argtypes):
        """The kernel for *argtypes*, compiled or taken from the dispatcher's
        caches as a Python launch would; the simulator compiles nothing."""
        if is_simulated(dispatcher):
            return dispatcher
        return dispatcher.compile(tuple(argtypes))

    @staticmethod
    def entry_name(kernel):
        return kernel.entry_name

    @staticmethod
    def param_types(kernel):
        return list(kernel._codelibrary.get_function(kernel.entry_name).function_type.args)

    @staticmethod
    def launch_problems(dispatcher, kernel):
        reasons = unsupported_kernel_features(kernel)
        problem = None if is_simulated(kernel) else _image_problem(kernel)
        return reasons + [problem] if problem else reasons


#: The adapter of numba-cuda kernels.
KERNELS = NumbaCudaKernels()


def _deviceless():
    """True when no GPU can be used and a compute capability is configured,
    the one case where the replacements below change anything."""
    # The GPU first: with one, a malformed NUMBA_CUDA_LAUNCH_CC is never read
    # and numba-cuda works exactly as without this package. is_available()
    # loads NVVM too: its failure names the extra that installs it.
    with _hinted(with_toolkit_hint):
        available = cuda.is_available()
    return not available and get_compute_capability() is not None


@contextlib.contextmanager
def _hinted(extend):
    """An exception raised inside is raised again as ``extend(exc)``, unless
    that is None."""
    try:
        yield
    except Exception as exc:
        hinted = extend(exc)
        if hinted is None:
            raise
        raise hinted from exc


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


TOOLKIT_HINT = (
    "\n(the CUDA compiler libraries (NVVM, NVRTC, nvJitLink) were not found: install them "
    "with the package's extra, pip install \"numba-cuda-launch[cu13]\", or [cu12] for a "
    "CUDA 12 driver)")
_TOOLKIT_LIBS = ("nvvm", "nvrtc", "nvjitlink")
_NOT_FOUND = ("not found", "cannot be found", "cannot be loaded", "failure finding",
              "not available")


def with_toolkit_hint(exc):
    """*exc* again, its message extended with :data:`TOOLKIT_HINT`, when it
    says a CUDA compiler library is missing; None otherwise."""
    low = str(exc).lower()
    if not any(lib in low for lib in _TOOLKIT_LIBS) or not any(w in low for w in _NOT_FOUND):
        return None
    return _extended(exc, TOOLKIT_HINT)


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


# Argument types a kernel takes (numba-cuda's _Kernel._prepare_args).
LAUNCHABLE_SCALARS = (
    types.Integer,
    types.Float,
    types.Boolean,
    types.Complex,
    types.NPDatetime,
    types.NPTimedelta,
)


@contextlib.contextmanager
def simulator_numba_spelling(kernel):
    """While a simulated launch of *kernel* from compiled code runs, its
    globals that are the ``numba`` package are a stand-in whose ``cuda`` is
    the launch's fake module, so ``numba.cuda.grid(1)`` works: the simulator
    itself swaps only globals that are the ``numba.cuda`` module."""
    import numba
    from numba.cuda.simulator import kernel as simkernel

    class SimulatedNumba(type(numba)):
        def __getattr__(self, name):
            context = simkernel._kernel_context
            if name == "cuda" and context is not None:
                return context
            return getattr(numba, name)

    globs = kernel.fn.__globals__
    names = [k for k, v in list(globs.items()) if v is numba]
    stand_in = SimulatedNumba("numba")
    for k in names:
        globs[k] = stand_in
    try:
        yield
    finally:
        for k in names:
            globs[k] = numba


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
        name = KERNELS.kernel_name(self.dispatcher)
        if KERNELS.is_device_function(self.dispatcher):
            raise KernelTypingError(
                "%r is a CUDA device function (cuda.jit(device=True)): it runs only "
                "on the GPU and cannot be called from CPU code; call it from a "
                "kernel" % name)
        raise KernelTypingError(
            "kernel %r is called without a launch configuration: write "
            "%s[griddim, blockdim](...) (or [griddim, blockdim, stream, "
            "sharedmem]) to launch it from CPU code" % (name, name))
    return get_call_type


# -- the simulator's kernels: the signatures they were declared with ----------------

# FakeCUDAKernel -> [argument types] or ("signatures", "why cuda.jit refuses
# them on a GPU"); kept here (the simulator itself drops signatures) rather
# than on the kernel objects, which are numba-cuda's.
_SIMULATED_SIGNATURES = weakref.WeakKeyDictionary()
# Simulator kernels made through the wrapped cuda.jit (their signatures, if
# any, are known); one made by a jit bound before the wrapping is not here.
_DECLARED = weakref.WeakSet()


def _record_signatures(kernel, sigs):
    """Keep the argument types of the signatures *kernel* was declared with,
    or why numba-cuda would refuse them on a GPU (the simulator accepts them,
    so the decorator must too; its launches from compiled code fail)."""
    try:
        parsed = [parse_signature(sig) for sig in sigs]
        for _, restype in parsed:
            if restype is not None and restype != types.void:
                raise TypeError("a kernel returns void, not %s" % restype)
    except Exception as exc:
        _SIMULATED_SIGNATURES[kernel] = (
            " or ".join(repr(s) for s in sigs), "%s: %s" % (type(exc).__name__, exc))
        return
    _SIMULATED_SIGNATURES[kernel] = [tuple(argtypes) for argtypes, _ in parsed]


def _simulated_signatures(kernel):
    recorded = _SIMULATED_SIGNATURES.get(kernel, ())
    return recorded if isinstance(recorded, list) else ()


def signature_recording_jit(original):
    """``numba.cuda.jit`` under the simulator: kernels remember the
    signatures they were declared with, so that overloads are chosen and
    ``voidptr`` arguments typed as on a GPU; what the decorator returns is
    the simulator's own."""
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    @functools.wraps(original)
    def jit(func_or_sig=None, *args, **kwargs):
        result = original(func_or_sig, *args, **kwargs)
        if isinstance(result, FakeCUDAKernel):
            _DECLARED.add(result)  # lazy: no signature to record
            return result
        sigs = None if func_or_sig is None else \
            func_or_sig if isinstance(func_or_sig, list) else [func_or_sig]

        def decorate(fn):
            kernel = result(fn)
            if isinstance(kernel, FakeCUDAKernel):
                _DECLARED.add(kernel)
                if sigs and not kernel._device:
                    _record_signatures(kernel, sigs)
            return kernel
        return decorate
    return jit


def lazy_argument_problem(dispatcher, problem):
    """*problem* (why lazily compiled *dispatcher* cannot take an argument),
    saying why a simulator kernel is lazy when a ``cuda.jit`` bound before
    this package was imported made it (the simulator keeps no signature)."""
    if not is_simulated(dispatcher) or dispatcher in _DECLARED:
        return problem
    return ("it was made by a cuda.jit bound before numba_cuda_launch was imported "
            "(from numba.cuda import jit), and numba-cuda's simulator keeps no "
            "signature, so it is launched as a lazily compiled kernel (%s); import "
            "numba_cuda_launch before binding jit, or write cuda.jit" % problem)


def simulator_refusal(what):
    """Why a kernel that *what* says cannot run is not launched under the
    simulator."""
    return ("this process runs numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1), which "
            "simulates numba-cuda kernels only, and %s; run without NUMBA_ENABLE_CUDASIM to "
            "launch it on a GPU, or simulate a numba-cuda kernel (from numba import cuda)"
            % what)


def stream_classes():
    """The classes of numba-cuda's stream objects (the simulator's under the
    simulator)."""
    if simulator_enabled():
        from numba.cuda.simulator.api import stream

        return (stream,)
    from numba.cuda.cudadrv import driver

    stream = getattr(driver, "Stream", None)
    return () if stream is None else (stream,)


def numba_cuda_array_classes():
    """numba-cuda's device array classes present (none under the simulator)."""
    if simulator_enabled():
        return ()
    from numba.cuda.cudadrv import devicearray

    return tuple(c for c in (getattr(devicearray, n, None) for n in
                             ("DeviceNDArray", "MappedNDArray", "ManagedNDArray"))
                 if c is not None)


def is_simulator_stream(obj):
    return simulator_enabled() and isinstance(obj, stream_classes())
