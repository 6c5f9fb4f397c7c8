"""Occupancy queries on a configured kernel in nopython code:
``cfg.max_active_blocks(args...)``, ``cfg.max_potential_block_size(args...)``,
``cfg.max_active_clusters(args...)`` and their ``_status`` forms; the arguments
select the overload as a launch's do. See docs/graphs.md.
"""

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.typing.templates import bound_function
from numba.extending import lower_builtin

from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.launch.backends import BACKEND
from numba_cuda_launch.launch.call import LaunchConfigAttributes, in_current_context, \
    launch_error_raiser, start_launch
from numba_cuda_launch.launch.refusals import block_threads, check_block_threads, \
    emit_raise_if_failed
from numba_cuda_launch.launch.launchconfig import LaunchConfig
from numba_cuda_launch.launch.plan import launch_signature
from numba_cuda_launch.cudadrv import occupancy as _rt

__all__ = ["QUERIES"]

_i32 = ir.IntType(32)
_NO_CLUSTER = ("the configuration has no cluster item and the kernel no compile-time "
               "cluster dimensions: add the cluster item, "
               "kernel[griddim, blockdim, stream, sharedmem, cluster]")


def _max_active_blocks(builder, guards, func, cfg):
    threads, _ = block_threads(builder, cfg)
    status, blocks = _rt.emit_max_active_blocks(builder, func, threads, cfg.sharedmem)
    return status, [blocks]


def _max_potential_block_size(builder, guards, func, cfg):
    status, grid, block = _rt.emit_max_potential_block_size(
        builder, func, cfg.sharedmem, ir.Constant(_i32, 0))
    return status, [grid, block]


def _max_active_clusters(builder, guards, func, cfg):
    has_cluster, cluster, dims = cfg.has_cluster, cfg.cluster, cfg.dims
    count = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))

    def query(cluster):
        status, n = _rt.emit_max_active_clusters(builder, func, dims, cfg.sharedmem,
                                                 cfg.stream, cluster)
        builder.store(n, count)
        return status
    with builder.if_else(has_cluster) as (given, compiled_in):
        with given:
            guards.check_status(lambda: query(cluster), "")
        with compiled_in:
            # Without the item only a kernel with compile-time cluster
            # dimensions has an answer: a failure says to add the item.
            guards.check_status(lambda: query(None), _NO_CLUSTER)
    return ir.Constant(_i32, 0), [builder.load(count)]


#: method name -> (emitter, number of results, whether the block size matters)
QUERIES = {
    "max_active_blocks": (_max_active_blocks, 1, True),
    "max_potential_block_size": (_max_potential_block_size, 2, False),
    "max_active_clusters": (_max_active_clusters, 1, True),
}


def _result_type(count, status):
    values = (types.int32,) * count
    if status:
        return types.Tuple((types.int32,) + values)
    return values[0] if count == 1 else types.UniTuple(types.int32, count)


def _emit_query(context, builder, sig, args, name):
    """Emit query *name*; returns ``(status, reason, values, messages)``."""
    plan, cfg, guards = start_launch(context, builder, sig.args[0], args[0], sig.args[1:])
    backend = BACKEND
    emit, count, uses_block = QUERIES[name]
    results = [cgutils.alloca_once_value(builder, ir.Constant(_i32, 0)) for _ in range(count)]
    if uses_block:
        check_block_threads(builder, guards, cfg)
    with builder.if_then(guards.ok(), likely=True):
        # a backend's own model (the simulator's), else the driver's answer
        modelled = backend.emit_occupancy(builder, name, cfg, block_threads(builder, cfg)[0])
        if modelled is None:
            status_ptr, func = backend.emit_function(context, builder, plan)
            guards.check_status(lambda: builder.load(status_ptr), "")
            # the function is the current context's: its device's limit
            backend.emit_launch_checks(context, builder, guards, plan, in_current_context(cfg))

        def ask():
            answer, values = modelled if modelled is not None else \
                emit(builder, guards, func, cfg)
            for slot, value in zip(results, values):
                builder.store(value, slot)
            return answer
        guards.check_status(ask, "")
    status, reason, messages = guards.result()
    return status, reason, [builder.load(r) for r in results], messages


def _register(name, status_form):
    """Type and lower ``cfg.<name>(args...)``, or its ``_status`` form."""
    method = name + ("_status" if status_form else "")

    @bound_function("LaunchConfig." + method)
    def resolve(self, cfg_ty, args, kws):
        sig = launch_signature(cfg_ty, args, kws, _result_type(QUERIES[name][1], status_form))
        refused = BACKEND.cluster_refusal() if name == "max_active_clusters" else None
        if refused:
            raise KernelTypingError("kernel %r: %s: %s (the other occupancy queries answer its "
                                    "model there)" % (cfg_ty.kernel_name, method, refused))
        return sig

    @lower_builtin("LaunchConfig." + method, LaunchConfig, types.VarArg(types.Any))
    def lower(context, builder, sig, args):
        status, reason, values, messages = _emit_query(context, builder, sig, args, name)
        if status_form:
            return context.make_tuple(builder, sig.return_type, [status] + values)
        emit_raise_if_failed(context, builder,
                             launch_error_raiser(sig.args[0].kernel_name, messages, name),
                             status, reason)
        if len(values) == 1:
            return values[0]
        return context.make_tuple(builder, sig.return_type, values)

    setattr(LaunchConfigAttributes, "resolve_" + method, resolve)


for _name in QUERIES:
    for _status_form in (False, True):
        _register(_name, _status_form)
