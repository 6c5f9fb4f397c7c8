"""Emitting a kernel launch through the driver, and what it asks the driver
first. The launch: ``cuLaunchKernel``, ``cuLaunchCooperativeKernel``, or
``cuLaunchKernelEx`` with launch attributes (thread-block clusters, the
cooperative attribute with a cluster) filled in stack slots of the calling
function (``cuOccupancyMaxActiveClusters`` takes the same config), in the
stream's context (the calling thread's for the default streams); nothing is
allocated per launch. Before it: dynamic shared memory above 48 KiB, the
per-kernel opt-in on the launch's device (docs/kernel-sources.md, "Dynamic
shared memory above 48 KiB"; docs/devices.md); and whether an
address can be handed to a kernel (device memory, or host memory the device
can reach: only the driver can tell, ``cuPointerGetAttribute``), asked for
arrays carrying a Numba meminfo and, in the checked mode, for every array and
pointer argument (README.md, "What you can write").
"""

import ctypes
import os

from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.driver import emit_ensure_context, emit_in_context, \
    emit_launch_device

__all__ = ["ATTRIBUTE_COOPERATIVE", "ATTRIBUTE_CLUSTER_DIMENSION",
           "ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION",
           "launch_config_type", "launch_attribute_type", "emit_launch_config",
           "emit_kernel_launch",
           "emit_dynamic_shared_opt_in", "shared_limit_globals", "TOO_LARGE", "MAX_DEVICES",
           "PER_DEVICE", "DEFAULT_PER_BLOCK",
           "MAX_DYNAMIC_SHARED_SIZE_BYTES", "SHARED_SIZE_BYTES",
           "MAX_SHARED_MEMORY_PER_BLOCK_OPTIN", "check_pointers", "pointer_checks_enabled",
           "emit_checked_mode"]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)

#: CUlaunchAttributeID values used here.
ATTRIBUTE_COOPERATIVE = 2
ATTRIBUTE_CLUSTER_DIMENSION = 4
ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6

_LAUNCH_CONFIG = ir.LiteralStructType([_i32] * 7 + [_i8p, _i8p, _i32])
_LAUNCH_ATTRIBUTE = ir.LiteralStructType([_i32, ir.ArrayType(ir.IntType(8), 4),
                                          ir.ArrayType(ir.IntType(64), 8)])


def launch_config_type():
    """``CUlaunchConfig`` (CUDA 12 and 13, 64-bit): grid x/y/z, block x/y/z,
    sharedMemBytes (``unsigned``), hStream, attrs, numAttrs (56 bytes)."""
    return _LAUNCH_CONFIG


def launch_attribute_type():
    """``CUlaunchAttribute``: the id (``i32``), 4 bytes of padding and a
    64-byte value union holding pointers, so eight ``i64`` (72 bytes)."""
    return _LAUNCH_ATTRIBUTE


def emit_launch_config(builder, dims, sharedmem, stream, cluster=None, cooperative=False,
                       has_cluster=None, dependent=None):
    """Fill a stack ``CUlaunchConfig`` and return it as ``i8*``.

    *dims*: the six ``i32`` dimensions (grid x, y, z, block x, y, z);
    *cluster*: three ``i32`` cluster dimensions, or None for no cluster
    attribute (*has_cluster*, an ``i1``: given only when true at run time);
    *cooperative*: add ``CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 1``; *dependent*
    (an ``i1``, or None): add
    ``CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 1`` when true.
    """
    config = cgutils.alloca_once(builder, _LAUNCH_CONFIG, name="launch_config")
    attrs = cgutils.alloca_once(builder, ir.ArrayType(_LAUNCH_ATTRIBUTE, 3),
                                name="launch_attributes")
    count = ir.Constant(_i32, 0)
    wanted = [(ATTRIBUTE_CLUSTER_DIMENSION, cluster, has_cluster)] if cluster is not None else []
    if cooperative:
        wanted.append((ATTRIBUTE_COOPERATIVE, None, None))
    if dependent is not None:
        wanted.append((ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, None, dependent))
    for attr_id, values, given in wanted:
        # attribute *count*, zeroed, its id set; its value the cluster's
        # three dimensions or a 1; counted when *given* (always if None)
        slot = builder.gep(attrs, [ir.Constant(_i32, 0), count], inbounds=True)
        builder.store(ir.Constant(_LAUNCH_ATTRIBUTE, None), slot)
        builder.store(ir.Constant(_i32, attr_id), cgutils.gep_inbounds(builder, slot, 0, 0))
        value = builder.bitcast(cgutils.gep_inbounds(builder, slot, 0, 2), _i32.as_pointer())
        for i, v in enumerate(values or [ir.Constant(_i32, 1)]):
            builder.store(v, builder.gep(value, [ir.Constant(_i32, i)], inbounds=True))
        count = builder.add(count, ir.Constant(_i32, 1) if given is None
                            else builder.zext(given, _i32))
    fields = list(dims) + [sharedmem, stream, builder.bitcast(attrs, _i8p), count]
    for i, v in enumerate(fields):
        builder.store(v, cgutils.gep_inbounds(builder, config, 0, i))
    return builder.bitcast(config, _i8p)


def emit_kernel_launch(builder, func, dims, sharedmem, stream, params, has_cluster, cluster,
                       cooperative, dependent):
    """Emit the launch of *func* (a ``CUkernel`` or ``CUfunction``): with a
    cluster (*has_cluster*, an ``i1``) or as a programmatic dependent launch
    (*dependent*, an ``i1``), ``cuLaunchKernelEx`` carries them (and the
    cooperative attribute); otherwise ``cuLaunchKernel`` or, for a
    *cooperative* kernel, ``cuLaunchCooperativeKernel``. A thread with no
    current context (a fresh thread of the caller's) gets device 0's primary
    context, then launches again. Returns the ``CUresult``."""
    common = [func] + list(dims) + [sharedmem, stream, params]
    extended = builder.or_(has_cluster, dependent)

    def launch():
        out = cgutils.alloca_once(builder, _i32)
        with builder.if_else(extended, likely=False) as (ex, plain):
            with ex:
                config = emit_launch_config(builder, dims, sharedmem, stream, cluster,
                                            cooperative, has_cluster, dependent)
                builder.store(driver.call(builder, "cuLaunchKernelEx", [
                    config, func, params, ir.Constant(_i8p.as_pointer(), None)]), out)
            with plain:
                if cooperative:
                    builder.store(driver.call(builder, "cuLaunchCooperativeKernel", common), out)
                else:
                    null = ir.Constant(_i8p.as_pointer(), None)
                    builder.store(driver.call(builder, "cuLaunchKernel", common + [null]), out)
        return builder.load(out)
    return emit_in_context(builder, launch)


#: CUfunction_attribute and CUdevice_attribute values (cuda.h)
SHARED_SIZE_BYTES = 1
MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
#: shared memory a block may use without the opt-in (every device since Kepler)
DEFAULT_PER_BLOCK = 48 * 1024
#: devices whose limit is remembered (a launch on one whose limit is known
#: asks the driver for the launch's device, no more); launches on others
#: take the cold path
MAX_DEVICES = 32

PER_DEVICE = ir.ArrayType(_i32, MAX_DEVICES)
#: what :func:`emit_dynamic_shared_opt_in` returns when the size is more
#: than the device allows a block of the kernel (never a CUresult)
TOO_LARGE = -1


def shared_limit_globals(module, tag):
    """The per-kernel limits of dynamic shared memory: ``ok`` (i32) and one
    per device (``[N x i32]``), 0 while unknown, as globals named by *tag*."""
    return [driver.zeroed_global(module, name, ty, 4) for name, ty in (
        ("numba_cuda_launch_shared_ok_" + tag, _i32),
        ("numba_cuda_launch_shared_dev_" + tag, PER_DEVICE))]


@driver.cold_function("numba_cuda_launch_raise_dynamic_shared",
                      (_i8p, _i32, _i8p, _i32.as_pointer(), PER_DEVICE.as_pointer()))
def _raiser(fn, builder):
    """``i32 raise(CUkernel, i32 sharedmem, CUstream, i32* ok, [N x i32]*
    per_device)``: read the limit on the device a launch on the stream runs
    on, raise it once to the device's maximum (so that concurrent launches
    never lower it again) and refresh ``ok``."""
    kernel, wanted, stream, ok, per_device = fn.args
    zero = ir.Constant(_i32, 0)

    def checked(name, *args):
        """Call *name* with an ``int*`` out parameter first; its value."""
        slot = cgutils.alloca_once_value(builder, zero)
        driver.return_if_failed(builder, driver.call(builder, name, [slot] + list(args)))
        return builder.load(slot)

    # the launch binds a primary context for a thread without one; so here
    driver.return_if_failed(builder, emit_ensure_context(builder))
    asked, device = emit_launch_device(builder, stream)
    driver.return_if_failed(builder, asked)
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


def emit_dynamic_shared_opt_in(builder, limits, sharedmem, emit_kernel, stream):
    """Emit making sure a kernel may be launched with *sharedmem* (``i32``,
    unsigned) bytes of dynamic shared memory on the device a launch on
    *stream* (``i8*``; NULL: the current context's device) runs on; *limits*
    are the kernel's (``(ok, per_device)`` pointers, :func:`shared_limit_globals`
    or an image record's) and *emit_kernel* emits
    getting its ``CUkernel``, ``(status_ptr, handle)``, on the path that
    needs it. Returns an ``i32``: 0, the ``CUresult`` of a failed driver
    call (a failed load: 0, left to the launch to report) or
    :data:`TOO_LARGE`."""
    module = builder.module
    ok, per_device = limits
    status = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    above = builder.icmp_unsigned(">", sharedmem, builder.load_atomic(ok, "monotonic", 4))
    # Above what every device is known to take (all devices' limits are
    # known only once each ran the kernel): the launch's device's limit, one
    # driver query away, before the cold path.
    cold = cgutils.alloca_once_value(builder, cgutils.false_bit)
    with builder.if_then(above, likely=False):
        asked, index = emit_launch_device(builder, stream)
        listed = builder.and_(builder.icmp_signed("==", asked, ir.Constant(_i32, 0)),
                              builder.icmp_unsigned("<", index, ir.Constant(_i32, MAX_DEVICES)))
        entry = builder.gep(per_device, [ir.Constant(_i32, 0),
                                         builder.select(listed, index, ir.Constant(_i32, 0))],
                            inbounds=True)
        known = builder.select(listed, builder.load_atomic(entry, "monotonic", 4),
                               ir.Constant(_i32, 0))
        builder.store(builder.icmp_unsigned(">", sharedmem, known), cold)
    with builder.if_then(builder.load(cold), likely=False):
        loaded, kernel = emit_kernel()
        ready = builder.icmp_signed("==", builder.load(loaded), ir.Constant(_i32, 0))
        with builder.if_then(ready, likely=True):
            raised = builder.call(_raiser(module), [kernel, sharedmem, stream, ok, per_device])
            # Up to 48 KiB only a kernel's static shared memory can make the
            # opt-in necessary: there a failure is left to the launch.
            needed = builder.icmp_unsigned(">", sharedmem, ir.Constant(_i32, DEFAULT_PER_BLOCK))
            builder.store(builder.select(needed, raised, ir.Constant(_i32, 0)), status)
    return builder.load(status)


# -- the host-memory check ---------------------------------------------------------

FLAG_SYMBOL = "numba_cuda_launch_check_pointers"
_flag = ctypes.c_int32(1 if os.environ.get("NUMBA_CUDA_LAUNCH_CHECK_POINTERS", "0")
                       not in ("", "0") else 0)
llvm_binding.add_symbol(FLAG_SYMBOL, ctypes.addressof(_flag))



def check_pointers(enabled: bool = True) -> None:
    """Turn the checked mode on (or off): every launch from compiled code
    then asks the driver whether each array's data and each pointer argument
    is memory the device can reach, and refuses the launch
    (``CUDA_ERROR_INVALID_VALUE``) otherwise. Costs one driver query per
    array or pointer argument per launch."""
    _flag.value = 1 if enabled else 0


def pointer_checks_enabled() -> bool:
    """True while the checked mode is on."""
    return bool(_flag.value)


def emit_checked_mode(builder):
    """Emit reading the checked-mode switch (an ``i1``)."""
    gv = driver.process_global(builder.module, FLAG_SYMBOL, _i32)
    return builder.icmp_signed("!=", builder.load(gv), ir.Constant(_i32, 0))
