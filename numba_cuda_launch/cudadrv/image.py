"""Kernel images and their first load: one loader for compiled code and Python.

A function that launches a kernel embeds its image (a cubin, or a
:mod:`.fatbin` for a list of compute capabilities) and a slot for its
``CUkernel``, or is given at run time the address of an image record holding
them (:data:`IMAGE_RECORD`: one ``jax_kernel`` handler body serves the
signatures of one layout, docs/jax.md). The first launch loads the image
(``cuLibraryLoadData``) and publishes the handle by compare-and-swap, so racing
threads agree on one; :func:`load_image` (``kernel_handle``) calls the same
compiled loader. README.md ("Kernel images, contexts and threads"),
docs/architecture.md.
"""

import ctypes
import functools
import hashlib
import threading
from dataclasses import dataclass

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.driver import emit_ensure_context
from numba_cuda_launch.cudadrv.launch import PER_DEVICE, shared_limit_globals

__all__ = ["KernelImage", "IMAGE_RECORD", "constant_bytes", "image_record_module",
           "emit_get_kernel",
           "emit_shared_limits", "emit_load", "load_image", "remember_param_sizes",
           "param_sizes"]

_i8 = ir.IntType(8)
_i8p = _i8.as_pointer()
_i32 = ir.IntType(32)


@dataclass(frozen=True)
class KernelImage:
    """A kernel's linked image and entry point name."""

    entry_name: str
    data: bytes

    @functools.cached_property
    def digest(self):
        h = hashlib.sha256(self.data)
        h.update(self.entry_name.encode())
        return h.hexdigest()[:24]


#: An image given at run time: ``{CUkernel slot, image, entry name, the
#: dynamic shared memory limits (ok, one per device)}``, the slot and limits
#: zero until the first launch, as the globals of an embedded image.
IMAGE_RECORD = ir.LiteralStructType([_i8p, _i8p, _i8p, _i32, PER_DEVICE])


def image_record_module(module, name, image):
    """Define in *module* the :data:`IMAGE_RECORD` global *name* of *image*
    (its data and entry name constants beside it); returns the global."""
    data = constant_bytes(module, name + "_image", image.data)
    entry = constant_bytes(module, name + "_name", image.entry_name.encode() + b"\0")
    record = ir.GlobalVariable(module, IMAGE_RECORD, name)
    record.initializer = IMAGE_RECORD([
        ir.Constant(_i8p, None), data.bitcast(_i8p), entry.bitcast(_i8p), _i32(0),
        PER_DEVICE(None)])
    record.align = 8
    return record


def _record_field(builder, record, index):
    ptr = builder.bitcast(record, IMAGE_RECORD.as_pointer())
    return builder.gep(ptr, [_i32(0), _i32(index)], inbounds=True)


def emit_shared_limits(builder, image):
    """``(ok, per_device)``: pointers to the dynamic shared memory limits of
    *image*, a :class:`KernelImage` or the ``i8*`` of an image record."""
    if isinstance(image, KernelImage):
        return shared_limit_globals(builder.module, image.digest)
    return _record_field(builder, image, 3), _record_field(builder, image, 4)


def constant_bytes(module, name, data):
    """The constant global *name* of *module* holding *data* (defined there
    if not yet), aligned for the driver's reads of an image."""
    gv = module.globals.get(name)
    if gv is None:
        gv = cgutils.global_constant(module, name, ir.Constant(
            ir.ArrayType(_i8, len(data)), bytearray(data)))
        # cuLibraryLoadData reads ELF headers with 8-byte loads.
        gv.align = 16
    return gv


@driver.cold_function("numba_cuda_launch_load_kernel", (_i8p.as_pointer(), _i8p, _i8p))
def _loader(fn, builder):
    """``i32 load(CUkernel* slot, image, name)``: load once, publish by CAS."""
    slot, image, name = fn.args
    null = ir.Constant(_i8p, None)
    zero = ir.Constant(_i32, 0)

    lib = cgutils.alloca_once_value(builder, null)
    kern = cgutils.alloca_once_value(builder, null)
    # cuInit is cheap once initialised, and makes the first launch work from
    # C callers that never initialised the driver themselves.
    driver.return_if_failed(builder, driver.call(builder, "cuInit", [zero]))
    driver.return_if_failed(builder, emit_ensure_context(builder))
    driver.return_if_failed(builder, driver.call(builder, "cuLibraryLoadData", [
        lib, image, null, null, zero, null, null, zero]))

    def unload():
        driver.call(builder, "cuLibraryUnload", [builder.load(lib)])

    driver.return_if_failed(
        builder,
        driver.call(builder, "cuLibraryGetKernel", [kern, builder.load(lib), name]),
        cleanup=unload,
    )
    pair = builder.cmpxchg(slot, null, builder.load(kern), "acq_rel", "acquire")
    lost = builder.not_(builder.extract_value(pair, 1))
    with builder.if_then(lost, likely=False):
        unload()  # another thread published its handle first
    builder.ret(zero)


def emit_load(builder, slot, image, name):
    """Emit a call of the loader: load *image* (``i8*``) and store the
    ``CUkernel`` of entry *name* (``i8*``, NUL-terminated) in *slot*
    (``i8**``) unless another thread did first; returns the ``CUresult``."""
    return builder.call(_loader(builder.module), [slot, image, name])


def emit_get_kernel(builder, image):
    """Emit code that yields ``(status_ptr, handle)``: the ``CUkernel`` of
    *image* (a :class:`KernelImage`, or the ``i8*`` of an image record),
    loaded on first use, and a stack slot holding 0, or the driver status of
    a failed load (then the handle is NULL)."""
    status_ptr = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    module = builder.module
    if isinstance(image, KernelImage):
        tag = image.digest
        slot = driver.zeroed_global(module, "numba_cuda_launch_slot_" + tag, _i8p, 8)
        data = constant_bytes(module, "numba_cuda_launch_image_" + tag, image.data)
        name = constant_bytes(
            module, "numba_cuda_launch_name_" + tag, image.entry_name.encode() + b"\0")
    else:
        slot, data, name = (_record_field(builder, image, i) for i in range(3))
        data, name = builder.load(data), builder.load(name)
    first = builder.load_atomic(slot, "acquire", 8)
    before = builder.block
    with builder.if_then(cgutils.is_null(builder, first), likely=False):
        status = builder.call(_loader(module), [slot, builder.bitcast(data, _i8p),
                                                builder.bitcast(name, _i8p)])
        builder.store(status, status_ptr)
        loaded = builder.load_atomic(slot, "acquire", 8)
        after_load = builder.block
    handle = builder.phi(_i8p)
    handle.add_incoming(first, before)
    handle.add_incoming(loaded, after_load)
    return status_ptr, handle


_python_loader = None
_python_lock = threading.Lock()
_loaded = {}  # digest -> (slot, the bytes given to the driver): loaded from Python


def _compile_python_loader():
    """The loader as a C function Python calls through ctypes (compiled once,
    on the first :func:`load_image`)."""
    from numba import cfunc, types
    from numba.extending import intrinsic

    @intrinsic
    def load(typingctx, slot, image, name):
        def codegen(context, builder, sig, args):
            driver.link_runtime(context)
            slot_ptr = builder.bitcast(args[0], _i8p.as_pointer())
            return emit_load(builder, slot_ptr, args[1], args[2])
        return types.int32(types.voidptr, types.voidptr, types.voidptr), codegen

    @cfunc(types.int32(types.voidptr, types.voidptr, types.voidptr))
    def load_entry(slot, image, name):
        return load(slot, image, name)

    return load_entry.ctypes


def load_image(image):
    """Load *image* (a :class:`KernelImage`) into the driver once for the
    process and return ``(status, CUkernel)``: the ``CUresult`` (0 on
    success) and the handle as an integer (0 on failure)."""
    global _python_loader
    with _python_lock:
        if _python_loader is None:
            _python_loader = _compile_python_loader()
        entry = _loaded.get(image.digest)
        if entry is None:
            entry = (ctypes.c_void_p(0), image.data, image.entry_name.encode() + b"\0")
            status = _python_loader(ctypes.addressof(entry[0]), *entry[1:])
            if status != 0:
                return status, 0
            _loaded[image.digest] = entry
        return 0, entry[0].value


_param_sizes = {}  # entry name -> parameter sizes, for tools reading params


def remember_param_sizes(entry_name, sizes):
    """Record the parameter sizes (bytes, in order) of kernel entry
    *entry_name*; the driver is only ever given their addresses."""
    _param_sizes[entry_name] = tuple(sizes)


def param_sizes(entry_name):
    """The parameter sizes recorded for *entry_name* in this process (by
    lowering a launch of it, or by loading such code from Numba's cache),
    or None."""
    return _param_sizes.get(entry_name)
