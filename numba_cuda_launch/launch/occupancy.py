"""Occupancy queries on a configured kernel, in CPU nopython code.

``kernel[griddim, blockdim, stream, sharedmem, cluster]`` answers the
driver's occupancy questions for the overload its arguments select (the
same selection as a launch: a lazy kernel compiles for their types); the
arguments themselves are not used:

* ``cfg.max_active_blocks(args...)`` -- blocks of ``blockdim`` threads with
  ``sharedmem`` bytes of dynamic shared memory resident on one
  multiprocessor (``cuOccupancyMaxActiveBlocksPerMultiprocessor``);
* ``cfg.max_potential_block_size(args...)`` -- ``(min_grid_size,
  block_size)``: the block size reaching the highest occupancy with
  ``sharedmem`` bytes per block, and the smallest grid filling the device
  with it (``cuOccupancyMaxPotentialBlockSize``, no block-size limit);
* ``cfg.max_active_clusters(args...)`` -- clusters of the configuration's
  cluster dimensions (or the kernel's compile-time ones) resident at once
  for this grid, block and shared memory (``cuOccupancyMaxActiveClusters``).

Each raises :class:`~numba_cuda_launch.CudaLaunchError` on failure and has
a ``_status`` form returning the ``CUresult`` first:
``status, blocks = cfg.max_active_blocks_status(args...)``. The kernel is
asked about in the current context (its image loaded there, as
``cfg.preload`` does); the answers are the device's.
"""

import functools

from llvmlite import ir
from numba import njit
from numba.core import cgutils, types
from numba.core.typing.templates import AttributeTemplate, bound_function, infer_getattr
from numba.extending import lower_builtin

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.errors import CudaLaunchError, KernelTypingError
from numba_cuda_launch.launch.backends import backend_for, call_jitted
from numba_cuda_launch.launch.caching import record_launch_target
from numba_cuda_launch.launch.launchconfig import (CONFIG_PROBLEMS, LaunchConfig, cluster_dims,
                                                   launch_dims)
from numba_cuda_launch.launch.selection import launch_signature, select_kernel
from numba_cuda_launch.runtime import occupancy as _rt
from numba_cuda_launch.runtime.driver import CUDA_ERROR_INVALID_VALUE

__all__ = ["QUERIES"]

_i32 = ir.IntType(32)
_i64 = ir.IntType(64)
_INT32_MAX = 2**31 - 1


def _block_size(builder, cfg):
    """``(threads, ok)``: threads per block as ``i32``, and whether the
    product fits the driver's ``int``."""
    dims = launch_dims(builder, cfg)[3:]
    total = ir.Constant(_i64, 1)
    for d in dims:
        total = builder.mul(total, builder.zext(d, _i64))
    ok = builder.icmp_unsigned("<=", total, ir.Constant(_i64, _INT32_MAX))
    return builder.trunc(total, _i32), ok


def _max_active_blocks(builder, func, cfg):
    threads, _ = _block_size(builder, cfg)
    status, blocks = _rt.emit_max_active_blocks(builder, func, threads, cfg.sharedmem)
    return status, [blocks]


def _max_potential_block_size(builder, func, cfg):
    status, grid, block = _rt.emit_max_potential_block_size(
        builder, func, cfg.sharedmem, ir.Constant(_i32, 0))
    return status, [grid, block]


def _max_active_clusters(builder, func, cfg):
    has_cluster, cluster = cluster_dims(builder, cfg)
    out = cgutils.alloca_once(builder, _i32)
    count = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    dims = launch_dims(builder, cfg)
    with builder.if_else(has_cluster) as (given, compiled_in):
        with given:
            status, n = _rt.emit_max_active_clusters(builder, func, dims, cfg.sharedmem,
                                                     cfg.stream, cluster)
            builder.store(status, out)
            builder.store(n, count)
        with compiled_in:
            status, n = _rt.emit_max_active_clusters(builder, func, dims, cfg.sharedmem,
                                                     cfg.stream, None)
            builder.store(status, out)
            builder.store(n, count)
    return builder.load(out), [builder.load(count)]


#: method name -> (emitter, number of results, whether the block size matters)
QUERIES = {
    "max_active_blocks": (_max_active_blocks, 1, True),
    "max_potential_block_size": (_max_potential_block_size, 2, False),
    "max_active_clusters": (_max_active_clusters, 1, True),
}
_TOO_MANY_THREADS = "blockdim has more than 2**31-1 threads in all"


def _result_type(count, status):
    values = (types.int32,) * count
    if status:
        return types.Tuple((types.int32,) + values)
    return values[0] if count == 1 else types.UniTuple(types.int32, count)


def _query_signature(cfg_ty, args, kws, name, status):
    sig = launch_signature(cfg_ty, args, kws, _result_type(QUERIES[name][1], status))
    if name == "max_active_clusters" and \
            _compat.is_simulated(select_kernel(cfg_ty.dispatcher, args).kernel):
        raise KernelTypingError(
            "kernel %r: %s: thread-block clusters are not simulated by numba-cuda's CUDA "
            "simulator (the other occupancy queries answer its model there)"
            % (cfg_ty.kernel_name, name + ("_status" if status else "")))
    return sig


def _resolver(name, status):
    method = name + ("_status" if status else "")

    def resolve(self, cfg_ty, args, kws):
        return _query_signature(cfg_ty, args, kws, name, status)
    return bound_function("LaunchConfig." + method)(resolve)


@infer_getattr
class LaunchConfigOccupancy(AttributeTemplate):
    key = LaunchConfig
    metadata = {"target": "cpu"}


for _name in QUERIES:
    for _status in (False, True):
        setattr(LaunchConfigOccupancy, "resolve_%s%s" % (_name, "_status" if _status else ""),
                _resolver(_name, _status))


def _emit_query(context, builder, sig, args, name):
    """Emit query *name*; returns ``(status, reason, values, messages)``."""
    cfg_ty = sig.args[0]
    kernel = select_kernel(cfg_ty.dispatcher, sig.args[1:]).kernel
    backend = backend_for(kernel)
    record_launch_target(context)
    cfg = cgutils.create_struct_proxy(cfg_ty)(context, builder, value=args[0])
    emit, count, uses_block = QUERIES[name]
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    reason = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    results = [cgutils.alloca_once_value(builder, ir.Constant(_i32, 0)) for _ in range(count)]
    messages = ("",) + tuple(CONFIG_PROBLEMS.values()) + (_TOO_MANY_THREADS,)

    def refuse(index):
        builder.store(ir.Constant(_i32, CUDA_ERROR_INVALID_VALUE), status)
        builder.store(ir.Constant(_i32, index), reason)

    for i, problem in enumerate(CONFIG_PROBLEMS, 1):
        with builder.if_then(builder.icmp_signed("==", cfg.problem, ir.Constant(_i32, problem)),
                             likely=False):
            refuse(i)
    if uses_block:
        _, fits = _block_size(builder, cfg)
        with builder.if_then(builder.not_(fits), likely=False):
            refuse(len(messages) - 1)
    ok = builder.icmp_signed("==", builder.load(status), ir.Constant(_i32, 0))

    def store(answer, values):
        builder.store(answer, status)
        for slot, value in zip(results, values):
            builder.store(value, slot)

    with builder.if_then(ok, likely=True):
        modelled = backend.emit_occupancy(builder, name, cfg)
        if modelled is not None:  # the backend's own model (the simulator's)
            store(*modelled)
        else:
            status_ptr, func = backend.emit_function(context, builder, kernel)
            builder.store(builder.load(status_ptr), status)
            loaded = builder.icmp_signed("==", builder.load(status_ptr), ir.Constant(_i32, 0))
            with builder.if_then(loaded, likely=True):
                store(*emit(builder, func, cfg))
    return (builder.load(status), builder.load(reason), [builder.load(r) for r in results],
            messages)


@functools.lru_cache(maxsize=None)
def _query_error_raiser(kernel_name, query, messages):
    """``raise_query_error(status, reason)``: CudaLaunchError naming the
    query, with constant text per reason (see launch.call)."""
    src = ["def raise_query_error(status, reason):"]
    for i, text in enumerate(messages[1:], 1):
        src.append("    if reason == %d:\n        raise CudaLaunchError(status, %r, %r, %r)"
                   % (i, kernel_name, text, query))
    src.append("    raise CudaLaunchError(status, %r, '', %r)" % (kernel_name, query))
    ns = {"CudaLaunchError": CudaLaunchError}
    exec("\n".join(src), ns)
    return njit(ns["raise_query_error"])


def _lowering(name, status_form):
    def lower(context, builder, sig, args):
        status, reason, values, messages = _emit_query(context, builder, sig, args, name)
        if status_form:
            return context.make_tuple(builder, sig.return_type, [status] + values)
        failed = builder.icmp_signed("!=", status, ir.Constant(_i32, 0))
        with cgutils.if_unlikely(builder, failed):
            call_jitted(context, builder,
                        _query_error_raiser(sig.args[0].kernel_name, name, messages),
                        (types.int32, types.int32), [status, reason])
        if len(values) == 1:
            return values[0]
        return context.make_tuple(builder, sig.return_type, values)
    return lower


for _name in QUERIES:
    for _status in (False, True):
        _method = "LaunchConfig.%s%s" % (_name, "_status" if _status else "")
        lower_builtin(_method, LaunchConfig, types.VarArg(types.Any))(_lowering(_name, _status))
