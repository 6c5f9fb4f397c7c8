"""Kernels as TVM-FFI functions (docs/tvm-ffi.md).

:func:`tvm_ffi_kernel` compiles, for one signature (the dtype and rank of each array
parameter, the dtype of each scalar), a nopython ``@cfunc`` with TVM-FFI's calling
convention that checks its arguments (:mod:`.tvm_ffi_abi`), reads the stream of the
TVM-FFI environment and launches the kernel; it is wrapped as a ``tvm_ffi.Function``,
callable from Python with PyTorch, CuPy, JAX or numba-cuda arrays, and exportable to
a C library (:func:`numba_cuda_launch.aot.build`). The checks of what is wrapped are
:mod:`.kernel_call`'s, as for ``jax_kernel``; the run-time pieces of the launch
configuration are :mod:`.jax_handler`'s.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numba
import numpy as np
from numba.core import types as nt
from numba.extending import intrinsic

from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.interop import jax_handler, tvm_ffi_abi as abi, xla_ffi
from numba_cuda_launch.interop.kernel_call import (
    bind_scalars, describe, is_int, kernel_compiler, launch_dims, refuse_launch_rule,
    refuse_unlaunchable, sharedmem_problem)
from numba_cuda_launch.interop.xla_ffi import c_string
from numba_cuda_launch.launch.launchconfig import config_problem
from numba_cuda_launch.launch.plan import plan_launch

__all__ = ["tvm_ffi_kernel", "TvmFfiKernel", "jax_function"]

_CALLER = "tvm_ffi_kernel"


# -- one signature's constants, as a type ---------------------------------------

class SignatureType(nt.Dummy):
    """A TVM-FFI function's signature: its array types, its scalars
    ``((name, NumPy dtype), ...)``, its parameter names and *context*, how its
    messages name the kernel. An instance is a constant of the function's
    body, typed ``TypeRef(SignatureType)``."""

    def __init__(self, arrays, scalars, names, context):
        self.arrays, self.scalars, self.names, self.context = arrays, scalars, names, context
        super().__init__("tvm_ffi_signature(%s; %s; %s)" % (
            ", ".join(map(str, arrays)),
            ", ".join("%s %s" % (n, d) for n, d in scalars) or "no scalars", context))

    @property
    def key(self):
        return self.arrays, self.scalars, self.names, self.context


_TABLES = nt.Tuple((nt.voidptr, nt.int64, nt.voidptr, nt.int64, nt.voidptr, nt.voidptr,
                    nt.voidptr))


@intrinsic
def _tables(typingctx, sig):
    """The signature's constants for the checks: ``(array table, number of
    arrays, scalar table, number of scalars, names, context, parameter
    list)``. Array entries are five int64 (DLPack code, bits, rank, item
    size, offset of the name in *names*); scalar entries four int64 (kind,
    low, high, name offset) and a float64 (the largest magnitude that
    stays finite): :func:`.tvm_ffi_abi.check_tensor_at` and
    :func:`~.tvm_ffi_abi.check_scalar_at`'s arguments."""
    s = sig.instance_type
    names = [n.encode() + b"\0" for n in s.names]
    offsets = [sum(map(len, names[:k])) for k in range(len(names))]
    n_arrays = len(s.arrays)
    arrays = b"".join(struct.pack("<5q", *abi.DL_DTYPES[np.dtype(str(a.dtype))], a.ndim,
                                  np.dtype(str(a.dtype)).itemsize, offsets[k])
                      for k, a in enumerate(s.arrays))
    scalars = b""
    for k, (_, dtype) in enumerate(s.scalars):
        kind, low, high, fmax = abi.scalar_limits(dtype)
        scalars += struct.pack("<4qd", kind, low, high, offsets[n_arrays + k], fmax)
    dtype_names = b"".join(str(d).encode() + b"\0" for _, d in s.scalars)
    context = s.context.encode() + b"\0"
    listing = ", ".join(s.names).encode() + b"\0"

    def codegen(context_, builder, sig_, args):
        def const(data):
            return xla_ffi._global_bytes(context_, builder, data or b"\0")
        i64 = context_.get_value_type(nt.int64)
        return context_.make_tuple(builder, _TABLES, [
            const(arrays), i64(n_arrays), const(scalars), i64(len(s.scalars)),
            const(b"".join(names) + dtype_names), const(context), const(listing)])
    return _TABLES(sig), codegen


def _view(context, builder, args, index, ty):
    t, _ = jax_handler._lower_call(context, builder, abi.arg_tensor, (nt.voidptr, nt.intp),
                                   (args, context.get_constant(nt.intp, index)))
    ndim, dtype = nt.IntegerLiteral(ty.ndim), nt.NumberClass(ty.dtype)
    view, _ = jax_handler._lower_call(
        context, builder, abi.tensor_as_array, (nt.voidptr, ndim, dtype),
        (t, jax_handler._placeholder(context, ndim), jax_handler._placeholder(context, dtype)))
    return view


@intrinsic
def _views(typingctx, args, sig):
    """The tuple of the signature's arrays: views of the call's tensors (checked)."""
    arrays = sig.instance_type.arrays
    ty = nt.Tuple(arrays)

    def codegen(context, builder, sig_, values):
        return context.make_tuple(builder, ty, [_view(context, builder, values[0], i, a)
                                                for i, a in enumerate(arrays)])
    return ty(args, sig), codegen


def _scalar(context, builder, args, index, dtype):
    """Argument *index* (checked) converted to *dtype* as nopython code
    converts (float16 made half bits without LLVM's helpers)."""
    index = context.get_constant(nt.intp, index)
    if dtype.kind == "f":
        value, ty = jax_handler._lower_call(context, builder, abi.arg_float,
                                            (nt.voidptr, nt.intp), (args, index))
        if dtype == np.float16:
            return jax_handler._lower_call(context, builder, jax_handler._as_half, (ty,),
                                           (value,))[0]
    elif dtype.kind == "b":
        value, ty = jax_handler._lower_call(context, builder, abi.arg_bool,
                                            (nt.voidptr, nt.intp), (args, index))
    else:
        value, ty = jax_handler._lower_call(context, builder, abi.arg_int,
                                            (nt.voidptr, nt.intp), (args, index))
    return context.cast(builder, value, ty, numba.from_dtype(dtype))


@intrinsic
def _scalar_values(typingctx, args, sig):
    """The tuple of the signature's scalars, read from the call's arguments
    after its arrays (checked)."""
    s = sig.instance_type
    ty = nt.Tuple([numba.from_dtype(d) for _, d in s.scalars])

    def codegen(context, builder, sig_, values):
        return context.make_tuple(builder, ty, [
            _scalar(context, builder, values[0], len(s.arrays) + k, d)
            for k, (_, d) in enumerate(s.scalars)])
    return ty(args, sig), codegen


_load_i64 = xla_ffi._make_load(nt.int64)
_load_f64 = xla_ffi._make_load(nt.float64)

_COUNT = "%s takes %lld arguments (%s); got %lld"
_DEVICES = ("%s: parameter '%s' (argument %lld) is on device %lld and parameter '%s' "
            "(argument 0) on device %lld: the kernel's arrays must be on one device")
_OTHER_DEVICE = ("%s: the tensors are on CUDA device %lld, but a launch on the stream "
                 "(TVM-FFI's for that device, or the default stream: the current device) runs "
                 "on device %lld: make device %lld current or set its stream")
_RULE_RAISED = ("%s: the launch rule raised an exception (call it from Python with the "
                "arrays' shapes and the scalars to see it)")
_BAD_CONFIG = ("%s: the launch rule gave grid (%lld, %lld, %lld) and block (%lld, %lld, "
               "%lld); CUDA takes grid " + jax_handler._GRID_TEXT + " and block "
               + jax_handler._BLOCK_TEXT + " with at most "
               + str(jax_handler.BLOCK_THREADS_MAX) + " threads in all")


@numba.njit(inline="always")
def _check(args, num_args, sig):
    """``OK``, or ``ERROR`` with the error raised: the call's arguments
    against the signature (count, tensors, scalars, one device)."""
    arrays, n_arrays, scalars, n_scalars, names, context, listing = _tables(sig)
    if num_args != n_arrays + n_scalars:
        return abi.report(c_string("TypeError"), c_string(_COUNT),
                          (context, n_arrays + n_scalars, listing, num_args))
    for i in range(n_arrays):
        e = xla_ffi._offset(arrays, 40 * i)
        if abi.check_tensor_at(args, num_args, i, _load_i64(e, 0), _load_i64(e, 8),
                               _load_i64(e, 16), _load_i64(e, 24), context,
                               xla_ffi._offset(names, _load_i64(e, 32))) != abi.OK:
            return abi.ERROR
    for k in range(n_scalars):
        e = xla_ffi._offset(scalars, 40 * k)
        name = xla_ffi._offset(names, _load_i64(e, 24))
        dtype_names = _after_names(names, n_arrays + n_scalars + k)
        if abi.check_scalar_at(args, num_args, n_arrays + k, _load_i64(e, 0), _load_i64(e, 8),
                               _load_i64(e, 16), _load_f64(e, 32), context, name,
                               dtype_names) != abi.OK:
            return abi.ERROR
    device = abi.tensor_device_id(abi.arg_tensor(args, 0))
    for i in range(1, n_arrays):
        other = abi.tensor_device_id(abi.arg_tensor(args, i))
        if other != device:
            return abi.report(c_string("TypeError"), c_string(_DEVICES), (
                context, xla_ffi._offset(names, _load_i64(xla_ffi._offset(arrays, 40 * i), 32)),
                i, other, names, device))
    return abi.OK


@numba.njit(inline="always")
def _after_names(names, k):
    """The *k*-th of the NUL-terminated strings at *names*."""
    p = names
    for _ in range(k):
        while xla_ffi._load_u8(p, 0) != 0:
            p = xla_ffi._offset(p, 1)
        p = xla_ffi._offset(p, 1)
    return p


# One launch form each: chosen in Python, so each function types only its own.

@numba.njit(inline="always")
def _launch_plain(kernel, grid, block, stream, shmem, cluster, args):
    return kernel[grid, block, stream, shmem].launch_status(*args)


@numba.njit(inline="always")
def _launch_dependent(kernel, grid, block, stream, shmem, cluster, args):
    return kernel[grid, block, stream, shmem].dependent().launch_status(*args)


@numba.njit(inline="always")
def _launch_cluster(kernel, grid, block, stream, shmem, cluster, args):
    return kernel[grid, block, stream, shmem, cluster].launch_status(*args)


@numba.njit(inline="always")
def _launch_cluster_dependent(kernel, grid, block, stream, shmem, cluster, args):
    return kernel[grid, block, stream, shmem, cluster].dependent().launch_status(*args)


_LAUNCHERS = {(False, False): _launch_plain, (False, True): _launch_dependent,
              (True, False): _launch_cluster, (True, True): _launch_cluster_dependent}


def make_function(kernel, sig, rule, dims, sharedmem, cluster, dependent):
    """Compile the ``@cfunc`` of one signature (*sig*, a :class:`SignatureType`):
    grid and block are *dims* (constants) or the ``@njit`` *rule*'s result
    for the arrays' shapes and the scalars; *cluster* (a 3-tuple, or None)
    and *dependent* choose the launch form."""
    launch = _LAUNCHERS[cluster is not None, bool(dependent)]
    cluster = cluster or (1, 1, 1)
    grid0, block0 = dims or ((1, 1, 1), (1, 1, 1))
    has_rule = rule is not None
    shmem = np.int64(sharedmem)

    def function(self, args, num_args, result):
        if _check(args, num_args, sig) != abi.OK:
            return abi.ERROR
        t = abi.arg_tensor(args, 0)
        stream = abi.stream(abi.tensor_device_type(t), abi.tensor_device_id(t))
        # never a launch on another device than the tensors' (managed and
        # host memory are reachable from any); where the driver cannot say
        # (no device), the launch reports its error
        if abi.tensor_device_type(t) == abi.DL_CUDA:
            device, here = abi.tensor_device_id(t), abi.launch_device(stream)
            if here >= 0 and here != device:
                _, _, _, _, _, context, _ = _tables(sig)
                return abi.report(c_string("ValueError"), c_string(_OTHER_DEVICE),
                                  (context, device, here, device))
        views = _views(args, sig)
        scalars = _scalar_values(args, sig)
        if has_rule:
            returned, config = jax_handler._call_rule(rule, jax_handler._shapes(views) + scalars)
            if not returned:
                _, _, _, _, _, context, _ = _tables(sig)
                return abi.report(c_string("ValueError"), c_string(_RULE_RAISED), (context,))
            grid, block = config
            grid, block = jax_handler._dim3(grid), jax_handler._dim3(block)
            if not jax_handler._config_ok(grid, block, shmem):
                _, _, _, _, _, context, _ = _tables(sig)
                return abi.report(c_string("ValueError"), c_string(_BAD_CONFIG), (
                    context, grid[0], grid[1], grid[2], block[0], block[1], block[2]))
        else:
            grid, block = grid0, block0
        status = launch(kernel, grid, block, stream, shmem, cluster, views + scalars)
        if status != 0:
            _, _, _, _, _, context, _ = _tables(sig)
            return abi.launch_error_at(status, context)
        return abi.OK
    return numba.cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.int32, nt.voidptr))(function)


# -- the Python side --------------------------------------------------------------

def _array_spec(kname, pname, spec):
    """``(dtype, ndim)`` of an array parameter from *spec*: ``(dtype, ndim)``
    or anything with a ``dtype`` and a ``shape`` (or ``ndim``)."""
    try:
        if isinstance(spec, (tuple, list)) and len(spec) == 2 and is_int(spec[1]):
            dtype, ndim = spec[0], int(spec[1])
        else:
            dtype = spec.dtype
            ndim = spec.ndim if hasattr(spec, "ndim") else len(spec.shape)
        if dtype is None or not is_int(ndim):  # np.dtype(None) is float64
            raise TypeError
        dtype, ndim = np.dtype(dtype), int(ndim)
    except (TypeError, AttributeError):
        raise TypeError("kernel %r parameter %r: expected (dtype, ndim) or an array (anything "
                        "with .dtype and .shape), got %s" % (kname, pname, describe(spec))
                        ) from None
    if dtype not in abi.DL_DTYPES:
        raise TypeError("kernel %r parameter %r: dtype %s cannot be passed to a kernel (%s "
                        "can)" % (kname, pname, dtype, ", ".join(map(str, abi.DL_DTYPES))))
    if not 0 <= ndim <= 32:
        raise ValueError("kernel %r parameter %r: rank %d is not one of 0 to 32"
                         % (kname, pname, ndim))
    return dtype, ndim


class TvmFfiKernel:
    """A kernel as a TVM-FFI function (see :func:`tvm_ffi_kernel`): call it
    as ``k(*arrays, *scalars)``; :attr:`function` is the ``tvm_ffi.Function``
    and :attr:`cfunc` its compiled code (for :func:`numba_cuda_launch.aot.build`)."""

    kernel: Any
    kernel_name: str
    arrays: list[tuple[np.dtype[Any], int]]
    scalars: dict[str, np.dtype[Any]]
    params: list[str]
    launch: Any
    sharedmem: int
    cluster: tuple[int, int, int] | None
    dependent: bool
    cfunc: Any
    function: Any

    def __init__(self, kernel: Any, launch: Any, arrays: Sequence[Any],
                 scalars: Mapping[str, Any] | None, sharedmem: int, cluster: Any,
                 dependent: bool) -> None:
        import tvm_ffi

        self._compiler = compiler = kernel_compiler(kernel, _CALLER)
        self.kernel = kernel
        self.kernel_name = kname = compiler.kernel_name(kernel)
        refuse_unlaunchable(compiler, kernel, _CALLER)
        self.scalars = bind_scalars(compiler, kernel, scalars, _CALLER)
        self.params = params = list(compiler.param_names(kernel))
        array_names = params[:len(params) - len(self.scalars)]
        if not isinstance(arrays, (list, tuple)) or len(arrays) != len(array_names):
            raise TypeError(
                "kernel %r: arrays must list the dtype and rank of each of its %d array "
                "parameter(s) %s, as (dtype, ndim) or an example array; got %s"
                % (kname, len(array_names), array_names, describe(arrays)))
        self.arrays = [_array_spec(kname, n, a) for n, a in zip(array_names, arrays)]
        rule, dims = None, None
        if isinstance(launch, numba.core.dispatcher.Dispatcher):
            rule = launch
        elif isinstance(launch, (tuple, list)):
            dims = launch_dims(launch, kname, "launch")
        else:
            raise TypeError(
                "kernel %r: launch must be (grid, block) or an @njit function of the arrays' "
                "shapes and the scalars returning it (it runs in the compiled function on "
                "every call, without Python); got %s" % (kname, describe(launch)))
        self.launch = launch
        problem = sharedmem_problem(sharedmem) or config_problem(cluster=cluster)
        if problem:
            raise problem[0]("kernel %r: %s" % (kname, problem[1]))
        self.sharedmem = int(sharedmem)
        if cluster is not None:
            items = list(cluster) if isinstance(cluster, (tuple, list)) else [cluster]
            cluster = tuple(int(c) for c in items) + (1,) * (3 - len(items))
            if dims is not None and any(g % c for g, c in zip(dims[0], cluster)):
                raise ValueError("kernel %r: grid %r is not made of whole clusters %r"
                                 % (kname, dims[0], cluster))
        self.cluster = cluster
        if not isinstance(dependent, (bool, np.bool_)):
            raise TypeError("kernel %r: dependent must be True or False, got %s"
                            % (kname, describe(dependent)))
        self.dependent = bool(dependent)
        argtypes = tuple(nt.Array(numba.from_dtype(d), n, "C") for d, n in self.arrays) \
            + tuple(numba.from_dtype(d) for d in self.scalars.values())
        try:
            plan_launch(kernel, argtypes, compiler)
        except KernelTypingError as exc:
            raise TypeError("%s\n(the kernel is called with the arrays, then the scalars)"
                            % exc) from None
        sig = SignatureType(argtypes[:len(self.arrays)], tuple(self.scalars.items()),
                            tuple(params), "numba_cuda_launch: CUDA kernel '%s'" % kname)
        try:
            self.cfunc = make_function(kernel, sig, rule, dims, self.sharedmem, cluster,
                                       self.dependent)
        except numba.core.errors.TypingError:
            if rule is not None:  # say what is wrong with the rule, if it is
                refuse_launch_rule(rule, [nt.UniTuple(nt.intp, n) for _, n in self.arrays]
                                   + list(argtypes[len(self.arrays):]), kname,
                                   "the shapes of its %d array(s) and its %d scalar(s)"
                                   % (len(self.arrays), len(self.scalars)))
            raise
        self.function = tvm_ffi.Function.__from_extern_c__(self.cfunc.address,
                                                           keep_alive_object=self.cfunc)

    @property
    def address(self) -> int:
        """The C function's address (``int f(void*, const TVMFFIAny*, int32_t, TVMFFIAny*)``)."""
        return int(self.cfunc.address)

    def __call__(self, *args: Any) -> None:
        """Launch the kernel on *args* (its arrays, then its scalars) through
        the TVM-FFI function."""
        self.function(*args)

    def __repr__(self) -> str:
        return "<TvmFfiKernel %s(%s)>" % (self.kernel_name, ", ".join(
            ["%s: %s[%dd]" % (n, d, k) for n, (d, k) in zip(self.params, self.arrays)]
            + ["%s: %s" % item for item in self.scalars.items()]))


def tvm_ffi_kernel(kernel: Any, launch: Any, *, arrays: Sequence[Any],
                   scalars: Mapping[str, Any] | None = None, sharedmem: int = 0,
                   cluster: Any = None, dependent: bool = False) -> TvmFfiKernel:
    """Compile *kernel* as a TVM-FFI function of one signature (docs/tvm-ffi.md).

    Parameters
    ----------
    kernel:
        a ``@cuda.jit`` kernel of numba-cuda or numba-cuda-mlir, or a foreign
        kernel; called as ``kernel(*arrays, *scalars)`` on C-ordered views of
        the call's tensors.
    launch:
        ``(grid, block)``, or an ``@njit`` function of the arrays' shapes and the
        scalars (positionally) returning it, run in the compiled function.
    arrays:
        the dtype and rank of each array parameter, in order: ``(dtype, ndim)``
        or an example array.
    scalars:
        ``{name: dtype}`` of the kernel's last parameters; a value the dtype
        cannot hold without a change is refused when the function is called.
    sharedmem:
        dynamic shared memory in bytes.
    cluster:
        thread-block cluster dimensions (an int or 1 to 3 ints; sm_90):
        launched through ``cuLaunchKernelEx``.
    dependent:
        a programmatic dependent launch (``kernel[...].dependent()``, sm_90).
    """
    return TvmFfiKernel(kernel, launch, arrays, scalars, sharedmem, cluster, dependent)


# -- inside jax.jit, through jax-tvm-ffi -------------------------------------------

_jax_targets: dict[tuple[int, str], str] = {}  # (id of the kernel, name) -> target


def jax_function(k: TvmFfiKernel, out_shapes: Any, *, name: str | None = None,
                 command_buffer: bool = True) -> Any:
    """A function on ``jax.Array`` values calling TVM-FFI kernel *k* inside
    ``jax.jit`` through jax-tvm-ffi: ``f(*inputs, **scalars)`` returns the
    outputs *out_shapes* gives (a ``jax.ShapeDtypeStruct``, a list of them,
    or a function of the inputs' structs and the scalars), the kernel's
    last array parameters, allocated by XLA. *name* is the FFI target's
    (default ``ncl.tvm_ffi.<module>.<kernel>``); *command_buffer* lets XLA
    capture the launch in CUDA graphs."""
    import jax
    import jax_tvm_ffi

    from numba_cuda_launch.interop import jax as jax_interop
    from numba_cuda_launch.launch.backends import BACKEND

    target = name or "ncl.tvm_ffi." + k._compiler.qualified_name(k.kernel)
    registered = _jax_targets.get((id(k), target))
    if registered is None:
        if target in _jax_targets.values():
            raise ValueError("jax_function(): FFI target %r is registered for another kernel: "
                             "pass name=" % target)
        jax_tvm_ffi.register_ffi_target(
            target, k.function, ["args", "rets"] + ["attrs." + s for s in k.scalars],
            platform="cpu" if BACKEND.runs_on_host else "gpu",
            allow_cuda_graph=bool(command_buffer))
        _jax_targets[id(k), target] = target

    def call(*inputs: Any, **scalar_values: Any) -> Any:
        if set(scalar_values) != set(k.scalars):
            raise TypeError("kernel %r: scalars %s were declared; got %s"
                            % (k.kernel_name, sorted(k.scalars), sorted(scalar_values)))
        attrs = {n: jax_interop._scalar_attribute(k.kernel_name, n, d, scalar_values[n])
                 for n, d in k.scalars.items()}
        in_specs = [jax_interop._spec(a, lambda: "kernel %r input: expected an array, got %s"
                                      % (k.kernel_name, describe(a))) for a in inputs]
        outs = out_shapes(*in_specs, **scalar_values) if callable(out_shapes) else out_shapes
        single = not isinstance(outs, (tuple, list))
        outs = [outs] if single else list(outs)
        if len(in_specs) + len(outs) != len(k.arrays):
            raise TypeError("kernel %r takes %d arrays; got %d inputs and %d outputs"
                            % (k.kernel_name, len(k.arrays), len(in_specs), len(outs)))
        result = jax.ffi.ffi_call(target, outs)(*inputs, **attrs)
        return result[0] if single else result
    return call
