"""``kernel[griddim, blockdim, stream, sharedmem]`` in CPU nopython code.

The type of a configured kernel (:class:`LaunchConfig`), its data model, the
typing of the ``getitem`` that makes one and its lowering live here. Calling a
configured kernel is typed and lowered in :mod:`numba_cuda_launch.launch.call`.
"""

import operator

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import default_manager
from numba.extending import lower_builtin, models, register_model
from numba.core.typing.templates import AbstractTemplate, infer, infer_global, signature

from numba_cuda_launch.compat.numba_cuda import CUDADispatcherType as CUDADispatcher
from numba_cuda_launch.errors import KernelTypingError
from numba_cuda_launch.launch.kernelkind import kernel_kind
from numba_cuda_launch.launch.selection import launch_signature
from numba_cuda_launch.launch.stream import is_stream_type, stream_handle_value

__all__ = ["LaunchConfig", "dim3_from_value", "launch_dims", "CONFIG_OK",
           "BAD_GRIDDIM", "BAD_BLOCKDIM", "BAD_SHAREDMEM", "CONFIG_PROBLEMS"]

_u32 = types.uint32
_dim3 = types.UniTuple(_u32, 3)
_U32_MAX = 0xFFFFFFFF

#: Values of a configuration's ``problem`` field: which item was out of the
#: driver's range (an unsigned 32-bit value, dimensions at least 1) when the
#: configuration was made at run time. A launch with a problem is refused
#: with ``CUDA_ERROR_INVALID_VALUE`` before the driver is called: an
#: out-of-range value is never replaced by another one.
CONFIG_OK, BAD_GRIDDIM, BAD_BLOCKDIM, BAD_SHAREDMEM = 0, -1, -2, -3
CONFIG_PROBLEMS = {
    BAD_GRIDDIM: "griddim has an item outside 1..2**32-1",
    BAD_BLOCKDIM: "blockdim has an item outside 1..2**32-1",
    BAD_SHAREDMEM: "sharedmem is outside 0..2**32-1 bytes",
}


def _kernel_name(dispatcher):
    return kernel_kind(dispatcher).name(dispatcher)


class LaunchConfig(types.Callable):
    """A kernel with its launch configuration: the value of
    ``kernel[griddim, blockdim, stream, sharedmem]``.

    Every configuration of one kernel has this one type, so configurations
    made at run time can be kept in a variable, merged across branches and
    called several times.
    """

    def __init__(self, dispatcher_type):
        self.dispatcher_type = dispatcher_type
        super().__init__(
            name="LaunchConfig(%s)"
            % _kernel_name(dispatcher_type.dispatcher)
        )

    @property
    def key(self):
        return self.dispatcher_type

    @property
    def dispatcher(self):
        return self.dispatcher_type.dispatcher

    @property
    def kernel_name(self):
        return _kernel_name(self.dispatcher)

    def get_call_type(self, context, args, kws):
        return launch_signature(self, args, kws)

    def get_call_signatures(self):
        return [], True

    def get_impl_key(self, sig):
        return type(self)


@register_model(LaunchConfig)
class LaunchConfigModel(models.StructModel):
    def __init__(self, dmm, fe_type):
        members = [
            ("grid", _dim3),
            ("block", _dim3),
            ("stream", types.voidptr),
            ("sharedmem", _u32),
            ("problem", types.int32),  # CONFIG_OK or which item is out of range
        ]
        super().__init__(dmm, fe_type, members)


# A kernel used as a global or closure variable in CPU code: numba-cuda
# registers the data model of its dispatcher type only for the CUDA target.
# The value carries nothing at run time (the kernel is known from its type).
if CUDADispatcher not in default_manager._handlers:
    register_model(CUDADispatcher)(models.OpaqueModel)


#: Types of kernels ``kernel[...]`` configures (the simulator adds its own).
KERNEL_TYPES = (CUDADispatcher,)


def add_kernel_type(ty):
    """Let ``kernel[...]`` configure kernels of type class *ty* too."""
    global KERNEL_TYPES
    KERNEL_TYPES = KERNEL_TYPES + (ty,)
    lower_builtin(operator.getitem, ty, types.Any)(lower_kernel_configure)


def _check_dim(kernel, what, ty):
    """Typing check of a griddim/blockdim item: an integer or a tuple of 1-3
    integers, positive where known at compile time."""
    items = list(ty) if isinstance(ty, types.BaseTuple) else [ty]
    if not (1 <= len(items) <= 3) or not all(
        isinstance(t, types.Integer) for t in items
    ):
        raise KernelTypingError(
            "kernel %r: %s must be an integer or a tuple of 1 to 3 integers, "
            "got %s" % (kernel, what, ty)
        )
    for t in items:
        _check_constant(kernel, what, getattr(t, "literal_value", None))


def _check_constant(kernel, what, value):
    """Refuse a constant configuration item the driver cannot take."""
    if not isinstance(value, int) or isinstance(value, bool):
        return
    low = 0 if what == "sharedmem" else 1
    if not low <= value <= _U32_MAX:
        raise KernelTypingError(
            "kernel %r: %s must be %s, got %d" % (
                kernel, what,
                "between 0 and 2**32-1 bytes" if low == 0
                else "between 1 and 2**32-1 (the driver takes 32-bit unsigned dimensions)",
                value))


def check_config_types(dispatcher, index_types):
    """Raise a KernelTypingError naming the kernel unless *index_types* is a
    valid ``(griddim, blockdim[, stream[, sharedmem]])``."""
    name = _kernel_name(dispatcher)
    if kernel_kind(dispatcher).is_device_function(dispatcher):
        raise KernelTypingError(
            "%r is a CUDA device function (cuda.jit(device=True)); only "
            "kernels can be launched with [griddim, blockdim, ...]" % name
        )
    if not 2 <= len(index_types) <= 4:
        raise KernelTypingError(
            "kernel %r: a launch configuration is [griddim, blockdim], "
            "[griddim, blockdim, stream] or [griddim, blockdim, stream, "
            "sharedmem]; got %d item(s)" % (name, len(index_types))
        )
    _check_dim(name, "griddim", index_types[0])
    _check_dim(name, "blockdim", index_types[1])
    if len(index_types) > 2 and not is_stream_type(index_types[2]):
        raise KernelTypingError(
            "kernel %r: the stream must be a raw CUstream (voidptr or an "
            "integer, 0 for the default stream) or a numba.cuda stream "
            "object passed in as an argument; got %s" % (name, index_types[2])
        )
    if len(index_types) > 3:
        shmem = index_types[3]
        if not isinstance(shmem, types.Integer):
            raise KernelTypingError(
                "kernel %r: sharedmem must be an integer number of bytes, got "
                "%s" % (name, shmem)
            )
        _check_constant(name, "sharedmem", getattr(shmem, "literal_value", None))


def _configure_signature(args, kws):
    """The signature of ``kernel[index]``; raises KernelTypingError for a
    bad configuration, None when *args* are not a kernel and an index."""
    if len(args) != 2 or kws:
        return None
    disp_ty, index = args
    if not isinstance(disp_ty, KERNEL_TYPES):
        return None
    index_types = list(index) if isinstance(index, types.BaseTuple) else [index]
    check_config_types(disp_ty.dispatcher, index_types)
    return signature(LaunchConfig(disp_ty), disp_ty, index)


@infer_global(operator.getitem)
class KernelConfigureTemplate(AbstractTemplate):
    """Types a valid ``kernel[griddim, blockdim, stream, sharedmem]`` (the
    lowering looks it up here); an invalid one is left to
    :class:`KernelConfigureErrors`."""

    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        try:
            return _configure_signature(args, kws)
        except KernelTypingError:
            return None


@infer
class KernelConfigureErrors(AbstractTemplate):
    """Reports an invalid configuration. Registered as a builtin template of
    ``getitem`` (``infer``): Numba tries those after every ``getitem``
    candidate failed and lets their errors through as they are, so the
    user reads this package's one sentence rather than one entry in a list
    of two dozen candidates."""

    key = operator.getitem
    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        return _configure_signature(args, kws)


@infer
class KernelConfigureLiteralCheck(AbstractTemplate):
    """Checks constant configurations (``kernel[-1, 32]``) against their
    literal values; typing itself falls through to ``getitem`` above."""

    key = "static_getitem"
    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        disp_ty, index = args
        if not isinstance(disp_ty, KERNEL_TYPES):
            return None
        items = index if isinstance(index, tuple) else (index,)
        name = _kernel_name(disp_ty.dispatcher)
        for what, item in zip(("griddim", "blockdim"), items):
            for v in (item if isinstance(item, tuple) else (item,)):
                _check_constant(name, what, v)
        if len(items) > 3:
            _check_constant(name, "sharedmem", items[3])
        return None


def _to_u32(context, builder, ty, val, low):
    """Cast an integer configuration item to the driver's unsigned 32-bit;
    returns ``(value, in_range)``, in range meaning ``low <= val < 2**32``
    (checked before any truncation, so nothing out of range wraps)."""
    i32 = ir.IntType(32)
    if ty.bitwidth < 32 or (not ty.signed and ty.bitwidth == 32):
        ok = (builder.icmp_unsigned(">=", val, val.type(low)) if not ty.signed
              else builder.icmp_signed(">=", val, val.type(low)))
        return context.cast(builder, val, ty, types.uint32), ok
    wide = context.cast(builder, val, ty, types.int64 if ty.signed else types.uint64)
    if ty.signed:
        ok = builder.and_(builder.icmp_signed(">=", wide, wide.type(low)),
                          builder.icmp_signed("<=", wide, wide.type(_U32_MAX)))
    else:
        ok = builder.and_(builder.icmp_unsigned(">=", wide, wide.type(low)),
                          builder.icmp_unsigned("<=", wide, wide.type(_U32_MAX)))
    return builder.trunc(wide, i32), ok


def dim3_from_value(context, builder, ty, val):
    """Lower a griddim/blockdim value (integer or tuple) to ``(dim3, ok)``:
    the dim3 tuple and whether every item is in ``1..2**32-1``."""
    if isinstance(ty, types.BaseTuple):
        pairs = [_to_u32(context, builder, t, builder.extract_value(val, i), 1)
                 for i, t in enumerate(ty)]
    else:
        pairs = [_to_u32(context, builder, ty, val, 1)]
    ok = pairs[0][1]
    for _, item_ok in pairs[1:]:
        ok = builder.and_(ok, item_ok)
    items = [v for v, _ in pairs] + [ir.Constant(ir.IntType(32), 1)] * (3 - len(pairs))
    return context.make_tuple(builder, _dim3, items), ok


def launch_dims(builder, cfg):
    """The six dimensions (grid x, y, z, block x, y, z) of a configuration
    struct proxy, in ``cuLaunchKernel``'s order."""
    return [builder.extract_value(dim, i) for dim in (cfg.grid, cfg.block) for i in range(3)]


@lower_builtin(operator.getitem, CUDADispatcher, types.Any)
def lower_kernel_configure(context, builder, sig, args):
    _disp, index = args
    index_ty = sig.args[1]
    if isinstance(index_ty, types.BaseTuple):
        item_types = list(index_ty)
        items = [builder.extract_value(index, i) for i in range(len(item_types))]
    else:
        item_types, items = [index_ty], [index]
    cfg = cgutils.create_struct_proxy(sig.return_type)(context, builder)
    i32 = ir.IntType(32)
    cfg.grid, grid_ok = dim3_from_value(context, builder, item_types[0], items[0])
    cfg.block, block_ok = dim3_from_value(context, builder, item_types[1], items[1])
    if len(items) > 2:
        cfg.stream = stream_handle_value(context, builder, item_types[2], items[2])
    else:
        cfg.stream = ir.Constant(ir.IntType(8).as_pointer(), None)
    if len(items) > 3:
        cfg.sharedmem, shmem_ok = _to_u32(context, builder, item_types[3], items[3], 0)
    else:
        cfg.sharedmem, shmem_ok = ir.Constant(i32, 0), cgutils.true_bit
    # The first item out of range, else CONFIG_OK.
    problem = builder.select(shmem_ok, ir.Constant(i32, CONFIG_OK), ir.Constant(i32, BAD_SHAREDMEM))
    problem = builder.select(block_ok, problem, ir.Constant(i32, BAD_BLOCKDIM))
    cfg.problem = builder.select(grid_ok, problem, ir.Constant(i32, BAD_GRIDDIM))
    return cfg._getvalue()
