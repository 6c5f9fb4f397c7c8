"""The kernel image a compiled function carries, and its load on first launch.

A function that launches a kernel holds the kernel's cubin as a constant and
a pointer-sized slot for its ``CUkernel``. The first launch loads the image
with the CUDA library API (``cuLibraryLoadData``, ``cuLibraryGetKernel``)
and publishes the handle with a compare-and-swap, so threads racing on the
first launch agree on one handle (a loser unloads its copy). A ``CUkernel`` is
context-independent: the driver loads it into whatever context is current
when it is launched, the primary context JAX uses or any other, on any device
of the image's architecture. Loaded images stay loaded for the life of the
process (see docs: one library per compiled function and kernel).
"""

import hashlib
from dataclasses import dataclass

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch import _compat, driver

__all__ = ["KernelImage", "image_for_kernel", "emit_get_kernel"]

_i8 = ir.IntType(8)
_i8p = _i8.as_pointer()
_i32 = ir.IntType(32)
_LOADER = "numba_cuda_launch_load_kernel"
_ENSURE_CONTEXT = "numba_cuda_launch_ensure_context"


@dataclass(frozen=True)
class KernelImage:
    """A kernel's linked image and entry point name."""

    entry_name: str
    data: bytes

    @property
    def digest(self):
        h = hashlib.sha256(self.data)
        h.update(self.entry_name.encode())
        return h.hexdigest()[:24]


def image_for_kernel(kernel):
    """The image of a numba-cuda compiled kernel (built for the current
    device, or the configured compute capability when there is no GPU)."""
    return KernelImage(_compat.kernel_entry_name(kernel), _compat.kernel_image(kernel))


def _global_constant(module, name, data):
    gv = module.globals.get(name)
    if gv is None:
        gv = cgutils.global_constant(module, name, ir.Constant(
            ir.ArrayType(_i8, len(data)), bytearray(data)))
        # cuLibraryLoadData reads ELF headers with 8-byte loads.
        gv.align = 16
    return gv


def _slot(module, name):
    gv = module.globals.get(name)
    if gv is None:
        gv = cgutils.add_global_variable(module, _i8p, name)
        gv.linkage = "internal"
        gv.initializer = ir.Constant(_i8p, None)
        gv.align = 8
    return gv


def _new_cold_function(module, name, argtypes):
    fn = ir.Function(module, ir.FunctionType(_i32, argtypes), name)
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    return fn, ir.IRBuilder(fn.append_basic_block("entry"))


def _return_if_failed(builder, status, cleanup=None):
    failed = builder.icmp_signed("!=", status, ir.Constant(_i32, 0))
    with builder.if_then(failed, likely=False):
        if cleanup is not None:
            cleanup()
        builder.ret(status)


def ensure_context_function(module):
    """``i32 ensure_context()``: with no context current on this thread, make
    device 0's primary context current (what the CUDA runtime API does, and
    the context numba-cuda and JAX use); 0 on success. A thread that already
    has a context keeps it."""
    fn = module.globals.get(_ENSURE_CONTEXT)
    if fn is not None:
        return fn
    fn, builder = _new_cold_function(module, _ENSURE_CONTEXT, ())
    ctx = cgutils.alloca_once_value(builder, ir.Constant(_i8p, None))
    _return_if_failed(builder, driver.call(builder, "cuCtxGetCurrent", [ctx]))
    with builder.if_then(cgutils.is_not_null(builder, builder.load(ctx)), likely=True):
        builder.ret(ir.Constant(_i32, 0))
    dev = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    _return_if_failed(builder, driver.call(builder, "cuDeviceGet", [dev, ir.Constant(_i32, 0)]))
    _return_if_failed(builder, driver.call(
        builder, "cuDevicePrimaryCtxRetain", [ctx, builder.load(dev)]))
    builder.ret(driver.call(builder, "cuCtxSetCurrent", [builder.load(ctx)]))
    return fn


def _loader(module):
    """``i32 load(CUkernel* slot, image, name)``: load once, publish by CAS."""
    fn = module.globals.get(_LOADER)
    if fn is not None:
        return fn
    fn, builder = _new_cold_function(module, _LOADER, (_i8p.as_pointer(), _i8p, _i8p))
    slot, image, name = fn.args
    null = ir.Constant(_i8p, None)
    zero = ir.Constant(_i32, 0)

    lib = cgutils.alloca_once_value(builder, null)
    kern = cgutils.alloca_once_value(builder, null)
    # cuInit is cheap once initialised, and makes the first launch work from
    # C callers that never initialised the driver themselves.
    _return_if_failed(builder, driver.call(builder, "cuInit", [zero]))
    _return_if_failed(builder, builder.call(ensure_context_function(module), []))
    _return_if_failed(builder, driver.call(builder, "cuLibraryLoadData", [
        lib, image, null, null, zero, null, null, zero]))

    def unload():
        driver.call(builder, "cuLibraryUnload", [builder.load(lib)])

    _return_if_failed(
        builder,
        driver.call(builder, "cuLibraryGetKernel", [kern, builder.load(lib), name]),
        cleanup=unload,
    )
    pair = builder.cmpxchg(slot, null, builder.load(kern), "acq_rel", "acquire")
    lost = builder.not_(builder.extract_value(pair, 1))
    with builder.if_then(lost, likely=False):
        unload()  # another thread published its handle first
    builder.ret(zero)
    return fn


def emit_get_kernel(builder, image):
    """Emit code that yields ``(status_ptr, handle)``: the image's
    ``CUkernel``, loaded on first use, and a stack slot holding 0, or the
    driver status of a failed load (then the handle is NULL)."""
    status_ptr = cgutils.alloca_once(builder, _i32, name="kernel_status")
    builder.store(ir.Constant(_i32, 0), status_ptr)
    module = builder.module
    tag = image.digest
    slot = _slot(module, "numba_cuda_launch_slot_" + tag)
    data = _global_constant(module, "numba_cuda_launch_image_" + tag, image.data)
    name = _global_constant(
        module, "numba_cuda_launch_name_" + tag, image.entry_name.encode() + b"\0")
    first = builder.load_atomic(slot, "acquire", 8)
    before = builder.block
    with builder.if_then(cgutils.is_null(builder, first), likely=False):
        status = builder.call(_loader(module), [
            slot,
            builder.bitcast(data, _i8p),
            builder.bitcast(name, _i8p),
        ])
        builder.store(status, status_ptr)
        loaded = builder.load_atomic(slot, "acquire", 8)
        after_load = builder.block
    handle = builder.phi(_i8p)
    handle.add_incoming(first, before)
    handle.add_incoming(loaded, after_load)
    return status_ptr, handle
