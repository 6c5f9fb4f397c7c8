"""A kernel called by another framework (JAX, TVM-FFI): which kernels can be,
its scalar parameters and launch configuration, checked once when it is wrapped,
in the same words for every framework (docs/jax.md, docs/tvm-ffi.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from numba.core import types as nt
from numba.core.errors import NumbaError

from numba_cuda_launch.kernels import SOURCES, KernelSource, source_of
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.launchconfig import config_problem, launch_dims_of

__all__ = ["describe", "is_int", "kind", "launch_dims", "kernel_compiler",
           "refuse_unlaunchable", "bind_scalars", "sharedmem_problem", "refuse_launch_rule",
           "is_launch_dim"]


def describe(value: Any) -> str:
    """``type repr`` of *value*, the repr cut to 60 characters, for messages."""
    text = repr(value)
    return "%s %s" % (type(value).__name__, text if len(text) < 60 else text[:57] + "...")


def is_int(v: Any) -> bool:
    """*v* is a Python or NumPy integer, not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def kind(source: str) -> str:
    """'numba-cuda-mlir kernel', 'foreign kernel': a kernel of compiler *source*."""
    return source if source.endswith("kernel") else source + " kernel"


def launch_dims(config: Any, kname: str, source: str) -> tuple[Any, Any]:
    """``(grid, block)`` as 3-tuples from a launch configuration, refused
    (naming the kernel and *source*) outside CUDA's limits: the one
    validator of configurations, :func:`..launch.launchconfig.launch_dims_of`."""
    if not isinstance(config, (tuple, list)) or len(config) != 2:
        raise TypeError("kernel %r: %s must give (grid, block), got %s"
                        % (kname, source, describe(config)))
    return launch_dims_of(kname, config[0], config[1], "the %s" % source)


def sharedmem_problem(sharedmem: Any) -> tuple[type, str] | None:
    """``(TypeError or ValueError, sentence)`` when *sharedmem* is not a
    number of bytes CUDA takes; None when it is (None is no number here)."""
    if sharedmem is None:
        return TypeError, "sharedmem must be an integer number of bytes, got None"
    return config_problem(sharedmem=sharedmem)


def is_launch_dim(ty: Any) -> bool:
    """*ty* is a launch dimension's Numba type, as a launch rule must return
    one: an integer or a tuple of 1 to 3 integers."""
    if isinstance(ty, nt.BaseTuple):
        return 1 <= len(ty) <= 3 and all(isinstance(t, nt.Integer) for t in ty)
    return isinstance(ty, nt.Integer)


def refuse_launch_rule(rule: Any, argtypes: Any, kname: str, given: str) -> None:
    """A TypeError naming kernel *kname* when ``@njit`` launch *rule* cannot
    be compiled for *argtypes* (the Numba types of what it is called with,
    which *given* describes) or returns something other than ``(grid,
    block)``, each an integer or a tuple of 1 to 3 integers; nothing when
    the rule is sound. Used to explain a compiled function that failed."""
    name = getattr(rule, "__name__", rule)
    argtypes = tuple(argtypes)
    try:
        rule.compile(argtypes)
        returned = rule.overloads[argtypes].signature.return_type
    except (NumbaError, TypeError) as exc:
        raise TypeError("kernel %r: the launch= @njit function %s cannot be compiled for %s "
                        "%s:\n%s" % (kname, name, given, argtypes, exc)) from None
    if not (isinstance(returned, nt.BaseTuple) and len(returned) == 2
            and all(is_launch_dim(t) for t in returned)):
        raise TypeError("kernel %r: the launch= @njit function %s returns %s; it must return "
                        "(grid, block), each an integer or a tuple of 1 to 3 integers"
                        % (kname, name, returned))


def kernel_compiler(kernel: Any, caller: str) -> KernelSource:
    """The adapter of *kernel*'s compiler; a TypeError, naming *caller*
    (``"jax_kernel"``), for anything but a kernel."""
    try:
        compiler = source_of(kernel)
    except TypeError:
        raise TypeError(
            "%s() needs a kernel: a @cuda.jit kernel of numba-cuda or numba-cuda-mlir, "
            "or a foreign kernel (numba_cuda_launch.foreign_kernel); got %s (kernels of %s)"
            % (caller, describe(kernel), ", ".join(c.name for c in SOURCES))) from None
    if compiler.is_device_function(kernel):
        raise TypeError("%s() needs a kernel; %r is a device function (device=True)"
                        % (caller, compiler.kernel_name(kernel)))
    return compiler


def refuse_unlaunchable(compiler: KernelSource, kernel: Any, caller: str) -> None:
    """Refuse a kernel this process's backend cannot launch (one the
    simulator cannot run, under it)."""
    why = BACKEND.refusal(compiler, kernel)
    if why:
        raise TypeError("%s(): %s %r cannot be launched here: %s"
                        % (caller, kind(compiler.name), compiler.kernel_name(kernel), why))


def bind_scalars(compiler: KernelSource, kernel: Any, scalars: Any,
                 caller: str) -> dict[str, np.dtype[Any]]:
    """``{name: dtype}`` of the kernel's trailing parameters, in their order,
    from *scalars* as the user gave it to *caller*; a TypeError saying what
    is wrong with it."""
    kname = compiler.kernel_name(kernel)
    if scalars is None:
        scalars = {}
    if not isinstance(scalars, Mapping):
        raise TypeError("kernel %r: scalars must be a dict {parameter name: dtype}, got %s"
                        % (kname, describe(scalars)))
    params = compiler.param_names(kernel)
    if len(scalars) >= len(params):
        raise TypeError(
            "kernel %r has parameters (%s); with %d scalar(s) it would have no array "
            "parameter: a kernel called through %s takes at least one array "
            "(an input or an output) before its scalars"
            % (kname, ", ".join(params), len(scalars), caller))
    trailing = params[len(params) - len(scalars):]
    if set(scalars) != set(trailing):
        raise TypeError(
            "kernel %r: scalars must be named as the kernel's last %d parameter(s) %s "
            "(in any order); got %s"
            % (kname, len(scalars), trailing, [str(k) for k in scalars]))
    bound = {}
    for pname in trailing:
        if scalars[pname] is None:  # np.dtype(None) is float64
            raise TypeError("kernel %r scalar %r: None is not a dtype; give the parameter's "
                            "type, e.g. np.float32" % (kname, pname))
        try:
            dtype = np.dtype(scalars[pname])
        except TypeError:
            raise TypeError("kernel %r scalar %r: %r is not a dtype"
                            % (kname, pname, scalars[pname])) from None
        if dtype.name == "bfloat16":
            raise TypeError(
                "kernel %r scalar %r: bfloat16 scalars cannot be passed: XLA attributes "
                "and TVM-FFI scalars carry no bfloat16 and Numba has no bfloat16 CPU type; "
                "declare it np.float32 and convert in the kernel" % (kname, pname))
        if dtype.kind not in "biuf" or dtype.itemsize > 8 or dtype.byteorder == ">":
            raise TypeError("kernel %r scalar %r must be a boolean, integer or float "
                            "dtype (bool, int8 to int64, uint8 to uint64, float16, float32 or "
                            "float64), got %s" % (kname, pname, dtype))
        bound[pname] = dtype
    return bound
