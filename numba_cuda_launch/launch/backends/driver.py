"""The CUDA driver backend: a launch is ``cuLaunchKernel``
(``cuLaunchCooperativeKernel``, or ``cuLaunchKernelEx`` with a cluster) of the
kernel's image, loaded on first use, or of another library's live handle,
with its parameters packed into stack slots; the same packing serves graph
node updates. One backend per kernel compiler: the image, entry point, layout
and cooperativeness come from its adapter. docs/architecture.md, steps 5-7;
docs/kernel-sources.md.
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.launch.backends import LaunchBackend, register
from numba_cuda_launch.launch.caching import record_param_sizes
from numba_cuda_launch.launch.params import emit_param_array
from numba_cuda_launch.launch.selection import COMPILERS
from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.context import emit_ensure_context, emit_in_context
from numba_cuda_launch.cudadrv.graph import emit_kernel_node_set_params
from numba_cuda_launch.cudadrv.image import emit_get_kernel, kernel_image
from numba_cuda_launch.cudadrv.launchex import emit_launch_ex
from numba_cuda_launch.cudadrv.pointers import emit_is_device_accessible
from numba_cuda_launch.cudadrv.sharedmem import TOO_LARGE, emit_dynamic_shared_opt_in

__all__ = ["DriverBackend"]

_i32 = ir.IntType(32)
_i8p = ir.IntType(8).as_pointer()

SHARED_TOO_LARGE = (
    "sharedmem is more dynamic shared memory than the device gives a block of this kernel "
    "(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN less the kernel's static "
    "shared memory; 227 KiB on Hopper, 163 KiB on A100)")
SHARED_OPT_IN_FAILED = (
    "raising the kernel's dynamic shared memory limit above 48 KiB "
    "(cuKernelSetAttribute CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) failed")


def _if_ok(builder, status_ptr):
    ok = builder.icmp_signed("==", builder.load(status_ptr), ir.Constant(_i32, 0))
    return builder.if_then(ok, likely=True)


class DriverBackend(LaunchBackend):
    """Launches the kernels of one kernel compiler (its adapter,
    *compiler*) through the CUDA driver."""

    def __init__(self, compiler):
        self.compiler = compiler

    def claims(self, kernel):
        return self.compiler.owns(kernel)

    def emit_is_device_accessible(self, builder, address, host_allocated):
        return emit_is_device_accessible(builder, address)

    def _emit_params(self, context, builder, kernel, formal_types, values):
        """Emit the ``kernelParams`` array (``void**``) of a launch."""
        param_types = self.compiler.param_types(kernel)
        # Tools that read parameters (the recording driver) learn their sizes.
        record_param_sizes(context, self.compiler.entry_name(kernel),
                           [t.get_abi_size(context.target_data) for t in param_types])
        flat = [v for ty, value in zip(formal_types, values)
                for v in self.compiler.flatten(context, builder, ty, value)]
        return emit_param_array(builder, flat, param_types, context.target_data)

    def _emit_kernel(self, context, builder, kernel):
        """``(status_ptr, handle)``: the ``CUkernel`` of the kernel's image,
        loaded on first use, or the kernel's live handle (status 0)."""
        live = self.compiler.live_handle(kernel)
        if live is None:
            return emit_get_kernel(builder, kernel_image(self.compiler, kernel))
        address, kind = live
        status_ptr = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
        info = "%s of kernel %r" % (kind, self.compiler.entry_name(kernel))
        return status_ptr, context.add_dynamic_addr(builder, address, info=info)

    def emit_argument_checks(self, context, builder, guards, ty, value, where):
        self.compiler.emit_argument_checks(context, builder, guards, ty, value, where)

    def emit_launch_checks(self, context, builder, guards, kernel, cfg):
        # More dynamic shared memory than 48 KiB (less the static) needs the
        # kernel's limit raised on the device first: one compare when known.
        live = self.compiler.live_handle(kernel)
        if live is not None and live[1] != "CUkernel":
            return  # a CUfunction's limit is its owner's to raise (docs/kernel-sources.md)
        tag = kernel_image(self.compiler, kernel).digest if live is None else "live_%x" % live[0]
        result = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))

        def opt_in():
            builder.store(emit_dynamic_shared_opt_in(
                builder, tag, cfg.sharedmem, lambda: self._emit_kernel(context, builder, kernel)),
                result)
            return builder.load(result)

        guards.check(lambda: builder.icmp_signed("==", opt_in(), ir.Constant(_i32, TOO_LARGE)),
                     SHARED_TOO_LARGE)
        guards.check_status(lambda: builder.load(result), SHARED_OPT_IN_FAILED)

    def emit_function(self, context, builder, kernel):
        status_ptr, handle = self._emit_kernel(context, builder, kernel)
        live = self.compiler.live_handle(kernel)
        func = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
        with _if_ok(builder, status_ptr):
            builder.store(emit_ensure_context(builder), status_ptr)
            if live is not None and live[1] == "CUfunction":
                builder.store(handle, func)  # already the function of its context
            else:
                # cuKernelGetFunction forces the per-context load of a CUkernel.
                with _if_ok(builder, status_ptr):
                    builder.store(driver.call(builder, "cuKernelGetFunction",
                                              [func, handle]), status_ptr)
        return status_ptr, builder.load(func)

    def emit_preload(self, context, builder, kernel):
        status_ptr, _ = self.emit_function(context, builder, kernel)
        return builder.load(status_ptr)

    def emit_launch(self, context, builder, kernel, cfg, formal_types, values, catch):
        params = self._emit_params(context, builder, kernel, formal_types, values)
        status_ptr, handle = self._emit_kernel(context, builder, kernel)
        with _if_ok(builder, status_ptr):
            dims = cfg.dims
            common = [handle] + dims + [cfg.sharedmem, cfg.stream, params]
            cooperative = self.compiler.cooperative(kernel)

            def plain():
                if cooperative:
                    return driver.call(builder, "cuLaunchCooperativeKernel", common)
                null = ir.Constant(_i8p.as_pointer(), None)
                return driver.call(builder, "cuLaunchKernel", common + [null])

            def launch():
                # With a cluster, cuLaunchKernelEx carries it (and the
                # cooperative attribute); otherwise the plain launch.
                out = cgutils.alloca_once(builder, _i32)
                with builder.if_else(cfg.has_cluster, likely=False) as (clustered, unclustered):
                    with clustered:
                        builder.store(emit_launch_ex(builder, handle, dims, cfg.sharedmem,
                                                     cfg.stream, params, cfg.cluster,
                                                     cooperative),
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
                builder, exe, node, func, cfg.dims, cfg.sharedmem, params),
                status_ptr)
        return builder.load(status_ptr)


for _compiler in COMPILERS:
    register(DriverBackend(_compiler))
