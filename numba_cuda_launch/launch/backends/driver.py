"""The CUDA driver backend: a launch is ``cuLaunchKernel``
(``cuLaunchCooperativeKernel``, or ``cuLaunchKernelEx`` with a cluster) of
the plan's image, loaded on first use, or of another library's live handle,
with its parameters packed into stack slots (the packing step: each value
checked against the entry point's own parameter size); the same packing
serves graph node updates. docs/architecture.md, steps 5-7;
docs/kernel-sources.md.
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.compat.cuda_target import image_target
from numba_cuda_launch.cudadrv import conditional as _conditional
from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv import events as _events
from numba_cuda_launch.cudadrv import graph as _graph
from numba_cuda_launch.cudadrv.driver import emit_ensure_context, emit_launch_device
from numba_cuda_launch.cudadrv.graph import emit_kernel_node_attribute, \
    emit_kernel_node_set_params
from numba_cuda_launch.cudadrv.image import KernelImage, emit_get_kernel, emit_shared_limits
from numba_cuda_launch.cudadrv.launch import ATTRIBUTE_CLUSTER_DIMENSION, \
    ATTRIBUTE_COOPERATIVE, TOO_LARGE, emit_dynamic_shared_opt_in, emit_kernel_launch, \
    shared_limit_globals
from numba_cuda_launch.kernels import on_register
from numba_cuda_launch.launch.backends.backend import LaunchBackend

__all__ = ["DriverBackend", "emit_param_array"]

_i32 = ir.IntType(32)
_i8p = ir.IntType(8).as_pointer()
_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2

SHARED_TOO_LARGE = (
    "sharedmem is more dynamic shared memory than the device gives a block of this kernel "
    "(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN less the kernel's static "
    "shared memory; 227 KiB on Hopper, 163 KiB on A100)")
SHARED_OPT_IN_FAILED = (
    "raising the kernel's dynamic shared memory limit above 48 KiB "
    "(cuKernelSetAttribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) failed")


def emit_param_array(builder, flat_values, kernel_llvm_types, target_data):
    """Store each flattened value in a stack slot and return the ``void**``
    array of slot addresses (NULL for a kernel without parameters). The
    value's size must equal the kernel parameter's: the driver copies the
    parameter's size from each address."""
    if not flat_values:
        return ir.Constant(_i8p.as_pointer(), None)
    ptrs = cgutils.alloca_once(builder, _i8p, size=len(flat_values), name="kernel_params")
    for i, (value, kty) in enumerate(zip(flat_values, kernel_llvm_types)):
        vsize = value.type.get_abi_size(target_data)
        ksize = kty.get_abi_size(target_data)
        if vsize != ksize:
            raise AssertionError(
                "kernel parameter %d is %d bytes; the packed value %s is %d"
                % (i, ksize, value.type, vsize))
        slot = cgutils.alloca_once_value(builder, value)
        builder.store(builder.bitcast(slot, _i8p), cgutils.gep_inbounds(builder, ptrs, i))
    return ptrs


class DriverRuntime:
    """The driver's emitters of synchronisation, events and graph operations
    (:mod:`...cudadrv.events`, :mod:`...cudadrv.graph`,
    :mod:`...cudadrv.conditional`), as
    :meth:`DriverBackend.runtime` gives them; each returns the ``CUresult``
    (with the handle made, for those that make one)."""

    emit_context_synchronize = staticmethod(_events.emit_context_synchronize)
    emit_stream_synchronize = staticmethod(_events.emit_stream_synchronize)
    emit_stream_query = staticmethod(_events.emit_stream_query)
    emit_event_create = staticmethod(_events.emit_event_create)
    emit_event_record = staticmethod(_events.emit_event_record)
    emit_event_query = staticmethod(_events.emit_event_query)
    emit_event_synchronize = staticmethod(_events.emit_event_synchronize)
    emit_event_elapsed_time = staticmethod(_events.emit_event_elapsed_time)
    emit_event_destroy = staticmethod(_events.emit_event_destroy)
    emit_event_handle = staticmethod(_events.emit_event_handle)
    emit_begin_capture = staticmethod(_graph.emit_begin_capture)
    emit_end_capture = staticmethod(_graph.emit_end_capture)
    emit_end_body = staticmethod(_graph.emit_end_body)
    emit_abort_capture = staticmethod(_graph.emit_abort_capture)
    emit_last_node = staticmethod(_graph.emit_last_node)
    emit_instantiate = staticmethod(_graph.emit_instantiate)
    emit_graph_launch = staticmethod(_graph.emit_graph_launch)
    emit_exec_update = staticmethod(_graph.emit_exec_update)
    emit_graph_destroy = staticmethod(_graph.emit_graph_destroy)
    emit_exec_destroy = staticmethod(_graph.emit_exec_destroy)
    emit_is_capturing = staticmethod(_graph.emit_is_capturing)
    emit_launch_device = staticmethod(emit_launch_device)
    emit_handle_create = staticmethod(_conditional.emit_handle_create)
    emit_add_conditional = staticmethod(_conditional.emit_add_conditional)
    emit_begin_body = staticmethod(_conditional.emit_begin_body)


_RUNTIME = DriverRuntime()


def _if_ok(builder, status_ptr):
    ok = builder.icmp_signed("==", builder.load(status_ptr), ir.Constant(_i32, 0))
    return builder.if_then(ok, likely=True)


class DriverBackend(LaunchBackend):
    """Launches every kernel source's kernels through the CUDA driver."""

    name = "driver"
    launches_image_records = True

    def cache_target(self):
        return ("driver", image_target())

    def runtime(self, context):
        return _RUNTIME

    def __init__(self):
        # the installed compilers' own streams and device arrays, as their
        # sources are registered (numba-cuda's once numba.cuda is imported);
        # any library's are read through their interfaces (__cuda_stream__,
        # CAI, DLPack)
        self._streams = self._arrays = self._fast_arrays = ()
        self._listeners = []
        on_register(self._add_classes)

    def _add_classes(self, source):
        streams, arrays, fast = (tuple(c) for c in source.python_classes())
        if streams or arrays or fast:
            self._streams += streams
            self._arrays += arrays
            self._fast_arrays += fast
            for listener in self._listeners:
                listener(streams, arrays, fast)

    def on_python_classes(self, listener):
        """As the base class's, and again with a compiler's classes once its
        source is registered."""
        self._listeners.append(listener)
        listener(self._streams, self._arrays, self._fast_arrays)

    def array_classes(self):
        return self._arrays

    def fast_array_classes(self):
        return self._fast_arrays

    def stream_classes(self):
        return self._streams

    def stream_handle(self, stream):
        return int(stream)  # numba-cuda's Stream: int() is its handle

    def refusal(self, source, kernel):
        return None  # every source's kernels launch through the driver

    def plan_parts(self, source, overload):
        live = source.live_handle(overload)
        entry = source.entry_name(overload)
        return dict(entry_name=entry, live=live,
                    image=None if live else KernelImage(entry, source.image(overload)),
                    param_types=tuple(source.param_types(overload)),
                    cooperative=source.cooperative(overload),
                    dependent=source.dependent(overload))

    def emit_is_device_accessible(self, builder, address, host_allocated):
        """Only the driver can tell: ``cuPointerGetAttribute`` fails for
        memory it does not know (device, managed, or mapped host memory it
        knows)."""
        emit_ensure_context(builder)
        out = cgutils.alloca_once(builder, _i32)
        status = driver.call(builder, "cuPointerGetAttribute", [
            builder.bitcast(out, _i8p), ir.Constant(_i32, _CU_POINTER_ATTRIBUTE_MEMORY_TYPE),
            builder.ptrtoint(address, ir.IntType(64))])
        return builder.icmp_signed("==", status, ir.Constant(_i32, 0))

    def _emit_params(self, context, builder, plan, values):
        """Emit the ``kernelParams`` array (``void**``) of a launch."""
        return emit_param_array(builder, plan.flatten(context, builder, values),
                                plan.param_types, context.target_data)

    def _emit_kernel(self, context, builder, plan, image=None):
        """``(status_ptr, handle)``: the ``CUkernel`` of the plan's image (or
        of the image record *image*), loaded on first use, or its live
        handle (status 0)."""
        if plan.live is None:
            return emit_get_kernel(builder, plan.image if image is None else image)
        address, kind = plan.live
        status_ptr = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
        info = "%s of kernel %r" % (kind, plan.entry_name)
        return status_ptr, context.add_dynamic_addr(builder, address, info=info)

    def emit_launch_checks(self, context, builder, guards, plan, cfg, image=None):
        # More dynamic shared memory than 48 KiB (less the static) needs the
        # kernel's limit raised on the device first: one compare when known.
        if plan.live is not None and plan.live[1] != "CUkernel":
            return  # a CUfunction's limit is its owner's to raise (docs/kernel-sources.md)
        if plan.live is None:
            limits = emit_shared_limits(builder, plan.image if image is None else image)
        else:
            limits = shared_limit_globals(builder.module, "live_%x" % plan.live[0])
        result = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))

        def opt_in():
            # on the launch's device: its stream's (docs/devices.md)
            builder.store(emit_dynamic_shared_opt_in(
                builder, limits, cfg.sharedmem,
                lambda: self._emit_kernel(context, builder, plan, image), cfg.stream), result)
            return builder.load(result)

        guards.check(lambda: builder.icmp_signed("==", opt_in(), ir.Constant(_i32, TOO_LARGE)),
                     SHARED_TOO_LARGE)
        guards.check_status(lambda: builder.load(result), SHARED_OPT_IN_FAILED)

    def emit_function(self, context, builder, plan, image=None):
        status_ptr, handle = self._emit_kernel(context, builder, plan, image)
        func = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
        with _if_ok(builder, status_ptr):
            builder.store(emit_ensure_context(builder), status_ptr)
            if plan.live is not None and plan.live[1] == "CUfunction":
                builder.store(handle, func)  # already the function of its context
            else:
                # cuKernelGetFunction forces the per-context load of a CUkernel.
                with _if_ok(builder, status_ptr):
                    builder.store(driver.call(builder, "cuKernelGetFunction",
                                              [func, handle]), status_ptr)
        return status_ptr, builder.load(func)

    def emit_preload(self, context, builder, plan, image=None):
        status_ptr, _ = self.emit_function(context, builder, plan, image)
        return builder.load(status_ptr)

    def emit_launch(self, context, builder, plan, cfg, values, catch, image=None):
        params = self._emit_params(context, builder, plan, values)
        status_ptr, handle = self._emit_kernel(context, builder, plan, image)
        with _if_ok(builder, status_ptr):
            dependent = cgutils.true_bit if plan.dependent else cfg.dependent
            builder.store(emit_kernel_launch(builder, handle, cfg.dims, cfg.sharedmem,
                                             cfg.stream, params, cfg.has_cluster, cfg.cluster,
                                             plan.cooperative, dependent), status_ptr)
        return builder.load(status_ptr)

    def emit_node_update(self, context, builder, plan, cfg, values, exe, node):
        params = self._emit_params(context, builder, plan, values)
        status_ptr, func = self.emit_function(context, builder, plan)
        with _if_ok(builder, status_ptr):
            builder.store(emit_kernel_node_set_params(
                builder, exe, node, func, cfg.dims, cfg.sharedmem, params),
                status_ptr)
        return builder.load(status_ptr)

    def emit_node_checks(self, builder, guards, plan, cfg, node):
        """Refuse an update of kernel node *node* that its replay would not
        launch as a launch of *cfg* would: a grid-sync (cooperative) kernel
        in a node recorded from a plain launch, a cluster other than the
        node's (an update cannot change it), a grid that is not made of
        whole clusters of the node's cluster."""
        if plan.cooperative:
            coop, = _node_attribute(builder, guards, node, ATTRIBUTE_COOPERATIVE, 1,
                                    "cooperative attribute")
            guards.check(lambda: builder.icmp_unsigned("==", coop, ir.Constant(_i32, 0)),
                         "the kernel synchronises its grid (a cooperative launch), but the "
                         "node was recorded from a plain launch and its replay would not be "
                         "cooperative: record the node with this kernel (or another "
                         "grid-sync kernel)")
        # A node without a cluster reads as (0, 0, 0): a cluster of 1, none.
        recorded = [builder.select(builder.icmp_unsigned("==", c, c.type(0)), c.type(1), c)
                    for c in _node_attribute(builder, guards, node, ATTRIBUTE_CLUSTER_DIMENSION,
                                             3, "cluster dimensions")]
        guards.check(lambda: builder.and_(cfg.has_cluster,
                                          _any(builder, "!=", cfg.cluster, recorded)),
                     "the cluster differs from the one the node was recorded with; an update "
                     "cannot change a node's cluster (record the launch with this cluster)")
        grid = cfg.dims[:3]
        guards.check(lambda: _any(builder, "!=",
                                  [builder.urem(g, c) for g, c in zip(grid, recorded)],
                                  [g.type(0) for g in grid]),
                     "griddim is not a multiple of the cluster dimensions the node was "
                     "recorded with in every direction (the grid is made of whole clusters)")


def _node_attribute(builder, guards, node, attr, count, what):
    """Ask the driver for attribute *attr* of kernel node *node*; returns
    the *count* values (zero when the query failed)."""
    slots = [cgutils.alloca_once_value(builder, ir.Constant(_i32, 0)) for _ in range(count)]

    def query():
        status, values = emit_kernel_node_attribute(builder, node, attr, count)
        for slot, v in zip(slots, values):
            builder.store(v, slot)
        return status
    guards.check_status(query, "cuGraphKernelNodeGetAttribute could not read the node's %s"
                        % what)
    return [builder.load(s) for s in slots]


def _any(builder, op, lhs, rhs):
    """An ``i1``: some pair of *lhs* and *rhs* compares *op* (unsigned)."""
    out = cgutils.false_bit
    for a, b in zip(lhs, rhs):
        out = builder.or_(out, builder.icmp_unsigned(op, a, b))
    return out
