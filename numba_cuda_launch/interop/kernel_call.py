"""A kernel called by another framework (JAX, TVM-FFI): which kernels can be,
its scalar parameters and launch configuration, checked once when it is wrapped,
in the same words for every framework (docs/jax.md, docs/tvm-ffi.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from numba_cuda_launch.kernels import SOURCES, KernelSource, source_of
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.launchconfig import launch_dims_of

__all__ = ["describe", "is_int", "kind", "launch_dims", "kernel_compiler",
           "refuse_unlaunchable", "bind_scalars"]


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
        if dtype.kind not in "biuf":
            raise TypeError("kernel %r scalar %r must be a boolean, integer or float "
                            "dtype, got %s" % (kname, pname, dtype))
        bound[pname] = dtype
    return bound
