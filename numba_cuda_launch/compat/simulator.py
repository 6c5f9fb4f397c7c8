"""Every use of numba-cuda's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``)
internals, in one place: whether it is on, the signatures its kernels were
declared with (it keeps none), the ``numba`` module its kernels see, its
stream and array classes, and its entry in Numba's cache index. The
simulator's launch backend (``launch/backends/simulator.py``) is the one user
above this layer; the replacements are installed by :mod:`.overrides`.
README.md, "Without a GPU: the CUDA simulator".
"""

import contextlib
import functools
import sys
import weakref

from numba.core import types

from numba_cuda_launch.compat.versions import has_numba_cuda, numba_cuda_imported

__all__ = ["enabled", "disabled", "refuse_builtin_cuda", "simulated_kernel_class",
           "array_class", "stream_class", "signature_recording_jit", "declared_signatures",
           "signature_refusal", "declared_through_package", "numba_spelling",
           "separating_index_key", "configuring_getitem", "recording_call",
           "set_python_launch_hook", "ORIGINAL_METHODS"]


def enabled() -> bool:
    """True when numba-cuda's CUDA simulator replaces the CUDA target (never
    without numba-cuda: numba-cuda-mlir has no simulator): numba-cuda's
    setting once ``numba.cuda`` is imported; before, the setting it will
    read (``NUMBA_ENABLE_CUDASIM``, as Numba read it), without importing it."""
    if not has_numba_cuda():
        return False
    cuda = sys.modules.get("numba.cuda")
    config = getattr(cuda, "config", None)
    if config is None:
        from numba.core import config
    return bool(getattr(config, "ENABLE_CUDASIM", 0))


def disabled() -> bool:
    return not enabled()


def refuse_builtin_cuda():
    """Where numba-cuda is installed and ``numba.cuda`` imported, refuse
    numba's deprecated built-in CUDA target in its place (numba-cuda's
    simulator has no ``implementation`` marker)."""
    if not numba_cuda_imported():
        return
    cuda = sys.modules["numba.cuda"]
    if not enabled() and getattr(cuda, "implementation", None) != "NVIDIA":
        raise ImportError(
            "numba_cuda_launch needs the numba-cuda package (NVIDIA's CUDA "
            "target for Numba); numba's built-in numba.cuda is deprecated and "
            "not supported. Install it with: pip install 'numba-cuda[cu12]' "
            "(or [cu13])")


def simulated_kernel_class():
    from numba.cuda.simulator.kernel import FakeCUDAKernel

    return FakeCUDAKernel


def array_class():
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    return FakeCUDAArray


def stream_class():
    from numba.cuda.simulator.api import stream

    return stream


# FakeCUDAKernel -> [argument types] or ("signatures", "why cuda.jit refuses
# them on a GPU"); kept here (the simulator itself drops signatures) rather
# than on the kernel objects, which are numba-cuda's.
_SIGNATURES = weakref.WeakKeyDictionary()
# Simulator kernels made through the wrapped cuda.jit (their signatures, if
# any, are known); one made by a jit bound before the wrapping is not here.
_DECLARED = weakref.WeakSet()


def _record_signatures(kernel, sigs):
    """Keep the argument types of the signatures *kernel* was declared with,
    or why numba-cuda would refuse them on a GPU (the simulator accepts them,
    so the decorator must too; its launches from compiled code fail)."""
    from numba.cuda.core import sigutils

    try:
        parsed = [sigutils.normalize_signature(sig) for sig in sigs]
        for _, restype in parsed:
            if restype is not None and restype != types.void:
                raise TypeError("a kernel returns void, not %s" % restype)
    except Exception as exc:
        _SIGNATURES[kernel] = (
            " or ".join(repr(s) for s in sigs), "%s: %s" % (type(exc).__name__, exc))
        return
    _SIGNATURES[kernel] = [tuple(argtypes) for argtypes, _ in parsed]


def declared_signatures(kernel):
    """The argument types of the signatures *kernel* was declared with (none: lazy)."""
    recorded = _SIGNATURES.get(kernel, ())
    return recorded if isinstance(recorded, list) else ()


def signature_refusal(kernel):
    """Why ``cuda.jit`` would refuse *kernel*'s signatures on a GPU, or None."""
    problem = _SIGNATURES.get(kernel)
    if isinstance(problem, tuple):
        return "cuda.jit refuses its signature %s on a GPU (%s)" % problem
    return None


def declared_through_package(kernel) -> bool:
    """Whether the wrapped ``cuda.jit`` made *kernel* (so its signatures,
    if any, are known)."""
    return kernel in _DECLARED


def signature_recording_jit(original):
    """``numba.cuda.jit`` under the simulator: kernels remember the
    signatures they were declared with, so that overloads are chosen and
    ``voidptr`` arguments typed as on a GPU; what the decorator returns is
    the simulator's own."""
    fake = simulated_kernel_class()

    @functools.wraps(original)
    def jit(func_or_sig=None, *args, **kwargs):
        result = original(func_or_sig, *args, **kwargs)
        if isinstance(result, fake):
            _DECLARED.add(result)  # lazy: no signature to record
            return result
        sigs = None if func_or_sig is None else \
            func_or_sig if isinstance(func_or_sig, list) else [func_or_sig]

        def decorate(fn):
            kernel = result(fn)
            if isinstance(kernel, fake):
                _DECLARED.add(kernel)
                if sigs and not kernel._device:
                    _record_signatures(kernel, sigs)
            return kernel
        return decorate
    return jit


@contextlib.contextmanager
def numba_spelling(kernel):
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


_INDEX_ENTRY = "numba_cuda_launch: simulator"  # the cache index key's item under the simulator


def separating_index_key(original):
    """``Cache._index_key``: under the simulator one item more, so simulated
    code never replaces (or is taken for) the driver's entry."""
    def _index_key(self, sig, codegen):
        key = original(self, sig, codegen)
        return key + (_INDEX_ENTRY,) if enabled() else key
    return _index_key


# -- numba-cuda's own launches from Python -------------------------------------------

# hook(kernel, args) -> True when it took the launch (recorded into a graph;
# it raises what it refuses), False to run it now: set by the launch backend
_python_launch_hook = None
#: FakeCUDAKernel's own __getitem__ and __call__ (once replaced): what a
#: launch that runs now (a replay, a launch from compiled code) calls
ORIGINAL_METHODS = {}


def set_python_launch_hook(hook):
    """Route launches from Python (``kernel[g, b, stream](...)``) through
    *hook* first (see :func:`recording_call`)."""
    global _python_launch_hook
    _python_launch_hook = hook


def configuring_getitem(original):
    """``FakeCUDAKernel.__getitem__``: the simulator ignores the stream of
    ``kernel[g, b, stream]``; it is kept (in the kernel's own ``stream``)
    so that a launch on a stream recording a graph is recorded."""
    ORIGINAL_METHODS["__getitem__"] = original

    def __getitem__(self, configuration):
        kernel = original(self, configuration)
        kernel.stream = configuration[2] if len(configuration) > 2 else 0
        return kernel
    return __getitem__


def recording_call(original):
    """``FakeCUDAKernel.__call__``: a launch from Python goes to the launch
    hook first, which records it when its stream records a graph (or
    refuses it as a GPU launch would be), as launches from compiled code."""
    from numba.cuda.simulator import kernel as simkernel

    ORIGINAL_METHODS["__call__"] = original

    def __call__(self, *args):
        hook = _python_launch_hook
        if self._device or simkernel._kernel_context is not None or hook is None or \
                not hook(self, args):
            return original(self, *args)
    return __call__
