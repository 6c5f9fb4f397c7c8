"""Kinds of kernel objects ``kernel[...]`` launches: what overload selection
needs to know about a kernel, per kind.

Selection (:mod:`.selection`) and configuration typing (:mod:`.launchconfig`)
ask the kernel's :class:`KernelKind` for its name and parameter names, the
overloads compiled so far (keyed by CPU argument types), whether it compiles
lazily, how to compile it for CPU argument types and why an overload cannot
be launched from compiled code. numba-cuda's dispatchers (and its simulator's
kernels) are the default kind; another kernel source (numba-cuda-mlir, in
:mod:`.backends.mlir`) registers its own with :func:`register_kind`.
"""

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.launch.claims import ClaimRegistry

__all__ = ["KernelKind", "register_kind", "kernel_kind"]


class KernelKind:
    """numba-cuda ``@cuda.jit`` dispatchers; subclasses override for other
    kernel objects."""

    def claims(self, dispatcher):
        """True if *dispatcher* is a kernel object of this kind."""
        return True

    def name(self, dispatcher):
        return _compat.dispatcher_name(dispatcher)

    def param_names(self, dispatcher):
        return _compat.dispatcher_param_names(dispatcher)

    def parameters(self, dispatcher):
        """The kernel function's ``inspect.Parameter`` objects, in order."""
        return _compat.dispatcher_parameters(dispatcher)

    def is_device_function(self, dispatcher):
        return _compat.is_device_function(dispatcher)

    def compiled_kernels(self, dispatcher):
        """``{CPU argument types: kernel}`` of the overloads compiled so far."""
        return _compat.compiled_kernels(dispatcher)

    def can_compile(self, dispatcher):
        """False for eagerly compiled kernels (``cuda.jit(signature)``)."""
        return _compat.can_compile(dispatcher)

    def argument_problem(self, ty):
        """Why this kind cannot take an argument of CPU type *ty* (beyond
        what every kind refuses), or None."""
        return None

    def lazy_argument_problem(self, dispatcher, problem):
        """*problem* (why a lazily compiled *dispatcher* cannot take an
        argument), with what this kind knows about why it is lazy."""
        return problem

    def compile(self, dispatcher, argtypes):
        """The kernel for CPU *argtypes*, compiled (or cached) as a Python
        launch with those types would compile it."""
        return _compat.compile_kernel(dispatcher, argtypes)

    def unsupported_features(self, dispatcher, kernel):
        """Reasons overload *kernel* cannot be launched from compiled code."""
        return _compat.unsupported_kernel_features(kernel)

    def image_problem(self, kernel):
        """Why *kernel*'s image cannot be built (the link error), or None;
        numba-cuda caches the image, so a launch's lowering reuses it."""
        if _compat.is_simulated(kernel):
            return None
        try:
            _compat.kernel_image(kernel)
        except Exception as exc:
            return "building its cubin for compute capability %s failed (is that " \
                "architecture supported by the installed CUDA toolkit?):\n%s" \
                % (_compat.target_compute_capability(), exc)
        return None


_kinds = ClaimRegistry("kernel kind", default=KernelKind())


def register_kind(kind):
    """Add *kind*; later registrations are asked first, the default last."""
    return _kinds.register(kind)


def kernel_kind(dispatcher):
    """The :class:`KernelKind` of *dispatcher*."""
    return _kinds.find(dispatcher)
