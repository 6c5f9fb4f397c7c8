"""Dynamic shared memory above 48 KiB: the per-kernel, per-device opt-in.

A block may use more dynamic shared memory than the kernel's
``CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`` only once that attribute
is raised on the device (as numba-cuda-mlir's, CuPy's and Triton's launchers
do). A launch at most the size known to work on every device costs one
compare; above it a cold function raises the limit (docs/kernel-sources.md,
"Dynamic shared memory above 48 KiB").
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.context import emit_ensure_context

__all__ = ["emit_dynamic_shared_opt_in", "TOO_LARGE", "MAX_DEVICES", "DEFAULT_PER_BLOCK",
           "MAX_DYNAMIC_SHARED_SIZE_BYTES", "SHARED_SIZE_BYTES",
           "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"]

_i32 = ir.IntType(32)
_i8p = ir.IntType(8).as_pointer()

#: CUfunction_attribute and CUdevice_attribute values (cuda.h)
SHARED_SIZE_BYTES = 1
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
#: shared memory a block may use without the opt-in (every device since Kepler)
DEFAULT_PER_BLOCK = 48 * 1024
#: devices whose limit is remembered; launches on others take the cold path
MAX_DEVICES = 32
_PER_DEVICE = ir.ArrayType(_i32, MAX_DEVICES)
#: what :func:`emit_dynamic_shared_opt_in` returns when the size is more
#: than the device allows a block of the kernel (never a CUresult)
TOO_LARGE = -1


def _globals(module, tag):
    """The per-kernel limits: ``ok`` (i32) and one per device (``[N x i32]``),
    0 while unknown."""
    return [driver.zeroed_global(module, name, ty, 4) for name, ty in (
        ("numba_cuda_launch_shared_ok_" + tag, _i32),
        ("numba_cuda_launch_shared_dev_" + tag, _PER_DEVICE))]


@driver.cold_function("numba_cuda_launch_raise_dynamic_shared",
                      (_i8p, _i32, _i32.as_pointer(), _PER_DEVICE.as_pointer()))
def _raiser(fn, builder):
    """``i32 raise(CUkernel, i32 sharedmem, i32* ok, [N x i32]* per_device)``:
    read the current device's limit, raise it once to the device's maximum (so
    that concurrent launches never lower it again) and refresh ``ok``."""
    kernel, wanted, ok, per_device = fn.args
    zero = ir.Constant(_i32, 0)

    def checked(name, *args):
        """Call *name* with an ``int*`` out parameter first; its value."""
        slot = cgutils.alloca_once_value(builder, zero)
        driver.return_if_failed(builder, driver.call(builder, name, [slot] + list(args)))
        return builder.load(slot)

    # the launch binds a primary context for a thread without one; so here
    driver.return_if_failed(builder, emit_ensure_context(builder))
    device = checked("cuCtxGetDevice")
    cached = builder.icmp_unsigned("<", device, ir.Constant(_i32, MAX_DEVICES))
    index = builder.select(cached, device, zero)
    entry = builder.gep(per_device, [zero, index], inbounds=True)
    known = builder.select(cached, builder.load_atomic(entry, "monotonic", 4), zero)
    limit = cgutils.alloca_once_value(builder, known)
    with builder.if_then(builder.icmp_unsigned("==", known, zero)):
        # unknown here: the kernel's current limit (its default, or what
        # another launcher set)
        builder.store(checked("cuKernelGetAttribute",
                              ir.Constant(_i32, MAX_DYNAMIC_SHARED_SIZE_BYTES), kernel, device),
                      limit)
    with builder.if_then(builder.icmp_unsigned(">", wanted, builder.load(limit))):
        static = checked("cuKernelGetAttribute", ir.Constant(_i32, SHARED_SIZE_BYTES), kernel,
                         device)
        most = checked("cuDeviceGetAttribute",
                       ir.Constant(_i32, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN), device)
        most = builder.sub(most, static)
        with builder.if_then(builder.icmp_unsigned(">", wanted, most), likely=False):
            builder.ret(ir.Constant(_i32, TOO_LARGE))
        driver.return_if_failed(builder, driver.call(builder, "cuKernelSetAttribute", [
            ir.Constant(_i32, MAX_DYNAMIC_SHARED_SIZE_BYTES), most, kernel, device]))
        builder.store(most, limit)
    with builder.if_then(cached):
        builder.store_atomic(builder.load(limit), entry, "monotonic", 4)
    # ok: the least limit over every device, once all are known (0 until then)
    count = checked("cuDeviceGetCount")
    least = cgutils.alloca_once_value(builder, ir.Constant(_i32, -1))
    with builder.if_else(builder.icmp_unsigned(">", count, ir.Constant(_i32, MAX_DEVICES))) \
            as (many, few):
        with many:
            builder.store(zero, least)
        with few:
            with cgutils.for_range(builder, count) as loop:
                d = builder.load_atomic(builder.gep(per_device, [zero, loop.index],
                                                    inbounds=True), "monotonic", 4)
                smaller = builder.icmp_unsigned("<", d, builder.load(least))
                builder.store(builder.select(smaller, d, builder.load(least)), least)
    builder.store_atomic(builder.load(least), ok, "monotonic", 4)
    builder.ret(zero)


def emit_dynamic_shared_opt_in(builder, tag, sharedmem, emit_kernel):
    """Emit making sure a kernel may be launched with *sharedmem* (``i32``,
    unsigned) bytes of dynamic shared memory on the current context's
    device; *tag* names the kernel's limits (its image's digest) and
    *emit_kernel* emits getting its ``CUkernel``, ``(status_ptr, handle)``,
    on the path that needs it. Returns an ``i32``: 0, the ``CUresult`` of a
    failed driver call (a failed load: 0, left to the launch to report) or
    :data:`TOO_LARGE`."""
    module = builder.module
    ok, per_device = _globals(module, tag)
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    above = builder.icmp_unsigned(">", sharedmem, builder.load_atomic(ok, "monotonic", 4))
    with builder.if_then(above, likely=False):
        loaded, kernel = emit_kernel()
        ready = builder.icmp_signed("==", builder.load(loaded), ir.Constant(_i32, 0))
        with builder.if_then(ready, likely=True):
            raised = builder.call(_raiser(module), [kernel, sharedmem, ok, per_device])
            # Up to 48 KiB only a kernel's static shared memory can make the
            # opt-in necessary: there a failure is left to the launch.
            needed = builder.icmp_unsigned(">", sharedmem, ir.Constant(_i32, DEFAULT_PER_BLOCK))
            builder.store(builder.select(needed, raised, ir.Constant(_i32, 0)), status)
    return builder.load(status)
