"""The CUDA driver backend: a launch is ``cuLaunchKernel`` (or
``cuLaunchCooperativeKernel``; ``cuLaunchKernelEx`` with launch attributes
when the configuration has a thread-block cluster) through the driver
table, on the kernel's image loaded on first use. The same parameter
packing serves updates of recorded launches in executable CUDA graphs
(``cuGraphExecKernelNodeSetParams``).

Arguments are packed in numba-cuda's kernel parameter ABI
(:mod:`numba_cuda_launch.launch.params`) into stack slots; nothing is
allocated per launch.
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.launch.backends import LaunchBackend, register
from numba_cuda_launch.launch.caching import record_param_sizes
from numba_cuda_launch.launch.launchconfig import cluster_dims, launch_dims
from numba_cuda_launch.launch.params import emit_param_array, flatten_values
from numba_cuda_launch.runtime import driver
from numba_cuda_launch.runtime.context import emit_ensure_context, emit_in_context
from numba_cuda_launch.runtime.graph import emit_kernel_node_set_params
from numba_cuda_launch.runtime.image import KernelImage, emit_get_kernel
from numba_cuda_launch.runtime.launchex import emit_launch_ex
from numba_cuda_launch.runtime.pointers import emit_is_device_accessible

__all__ = ["DriverBackend", "image_for_kernel"]

_i32 = ir.IntType(32)
_i8p = ir.IntType(8).as_pointer()


def image_for_kernel(kernel):
    """The :class:`KernelImage` of a numba-cuda compiled kernel (built for the
    current device, or the configured compute capability with no GPU)."""
    return KernelImage(_compat.kernel_entry_name(kernel), _compat.kernel_image(kernel))


def _if_ok(builder, status_ptr):
    ok = builder.icmp_signed("==", builder.load(status_ptr), ir.Constant(_i32, 0))
    return builder.if_then(ok, likely=True)


class DriverBackend(LaunchBackend):
    """Launches numba-cuda kernels through the CUDA driver."""

    name = "driver"

    def claims(self, kernel):
        return not _compat.is_simulated(kernel)

    def emit_is_device_accessible(self, builder, address, host_allocated):
        return emit_is_device_accessible(builder, address)

    def image(self, kernel):
        """The :class:`KernelImage` of *kernel*."""
        return image_for_kernel(kernel)

    def cooperative(self, kernel):
        """True if *kernel* needs ``cuLaunchCooperativeKernel``."""
        return _compat.kernel_is_cooperative(kernel)

    def param_types(self, kernel):
        """The LLVM types of *kernel*'s parameters, in order."""
        return _compat.kernel_param_llvm_types(kernel)

    def param_array(self, context, builder, kernel, formal_types, values):
        """Emit the ``kernelParams`` array (``void**``) of a launch."""
        flat = flatten_values(context, builder, formal_types, values)
        return emit_param_array(builder, flat, self.param_types(kernel), context.target_data)

    def _emit_params(self, context, builder, kernel, formal_types, values):
        # Tools that read parameters (the recording driver) learn their sizes.
        record_param_sizes(context, self.image(kernel).entry_name,
                           [t.get_abi_size(context.target_data)
                            for t in self.param_types(kernel)])
        return self.param_array(context, builder, kernel, formal_types, values)

    def emit_function(self, context, builder, kernel):
        # cuKernelGetFunction forces the per-context load of a CUkernel.
        status_ptr, handle = emit_get_kernel(builder, self.image(kernel))
        func = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
        with _if_ok(builder, status_ptr):
            builder.store(emit_ensure_context(builder), status_ptr)
            with _if_ok(builder, status_ptr):
                builder.store(driver.call(builder, "cuKernelGetFunction", [func, handle]),
                              status_ptr)
        return status_ptr, builder.load(func)

    def emit_preload(self, context, builder, kernel):
        status_ptr, _ = self.emit_function(context, builder, kernel)
        return builder.load(status_ptr)

    def emit_launch(self, context, builder, kernel, cfg, formal_types, values, catch):
        params = self._emit_params(context, builder, kernel, formal_types, values)
        status_ptr, handle = emit_get_kernel(builder, self.image(kernel))
        with _if_ok(builder, status_ptr):
            dims = launch_dims(builder, cfg)
            common = [handle] + dims + [cfg.sharedmem, cfg.stream, params]
            cooperative = self.cooperative(kernel)
            has_cluster, cluster = cluster_dims(builder, cfg)

            def plain():
                if cooperative:
                    return driver.call(builder, "cuLaunchCooperativeKernel", common)
                null = ir.Constant(_i8p.as_pointer(), None)
                return driver.call(builder, "cuLaunchKernel", common + [null])

            def launch():
                # With a cluster, cuLaunchKernelEx carries it (and the
                # cooperative attribute); otherwise the plain launch.
                out = cgutils.alloca_once(builder, _i32)
                with builder.if_else(has_cluster, likely=False) as (clustered, unclustered):
                    with clustered:
                        builder.store(emit_launch_ex(builder, handle, dims, cfg.sharedmem,
                                                     cfg.stream, params, cluster, cooperative),
                                      out)
                    with unclustered:
                        builder.store(plain(), out)
                return builder.load(out)

            # A thread with no current context (a fresh thread of the
            # caller's) gets device 0's primary context, then launches again.
            builder.store(emit_in_context(builder, launch), status_ptr)
        return builder.load(status_ptr)

    def emit_node_update(self, context, builder, kernel, cfg, formal_types, values, exe, node):
        params = self._emit_params(context, builder, kernel, formal_types, values)
        status_ptr, func = self.emit_function(context, builder, kernel)
        with _if_ok(builder, status_ptr):
            builder.store(emit_kernel_node_set_params(
                builder, exe, node, func, launch_dims(builder, cfg), cfg.sharedmem, params),
                status_ptr)
        return builder.load(status_ptr)


register(DriverBackend())
