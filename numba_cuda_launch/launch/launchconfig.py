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

__all__ = ["LaunchConfig", "dim3_from_value"]

_u32 = types.uint32
_dim3 = types.UniTuple(_u32, 3)


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
        value = getattr(t, "literal_value", None)
        if value is not None and value < 1:
            raise KernelTypingError(
                "kernel %r: %s must be positive, got %d" % (kernel, what, value)
            )


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
        value = getattr(shmem, "literal_value", None)
        if value is not None and value < 0:
            raise KernelTypingError(
                "kernel %r: sharedmem must not be negative, got %d"
                % (name, value)
            )


@infer_global(operator.getitem)
class KernelConfigureTemplate(AbstractTemplate):
    """Types ``kernel[griddim, blockdim, stream, sharedmem]``."""

    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        if len(args) != 2 or kws:
            return None
        disp_ty, index = args
        if not isinstance(disp_ty, KERNEL_TYPES):
            return None
        index_types = (
            list(index) if isinstance(index, types.BaseTuple) else [index]
        )
        check_config_types(disp_ty.dispatcher, index_types)
        return signature(LaunchConfig(disp_ty), disp_ty, index)


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
            values = item if isinstance(item, tuple) else (item,)
            for v in values:
                if isinstance(v, int) and v < 1:
                    raise KernelTypingError(
                        "kernel %r: %s must be positive, got %d" % (name, what, v))
        if len(items) > 3 and isinstance(items[3], int) and items[3] < 0:
            raise KernelTypingError(
                "kernel %r: sharedmem must not be negative, got %d" % (name, items[3]))
        return None


def _to_u32(context, builder, ty, val):
    """Cast an integer dimension to the driver's unsigned 32-bit, mapping
    values out of range to 0 so the driver rejects them rather than a wrapped
    value being launched."""
    wide = context.cast(builder, val, ty, types.int64)
    if ty.signed or ty.bitwidth >= 32:
        # A uint64 above 2**63 reads as negative here, so it is caught too.
        ok = builder.and_(
            builder.icmp_signed(">=", wide, wide.type(0)),
            builder.icmp_signed("<=", wide, wide.type(0xFFFFFFFF)),
        )
        wide = builder.select(ok, wide, wide.type(0))
    return builder.trunc(wide, ir.IntType(32))


def dim3_from_value(context, builder, ty, val):
    """Lower a griddim/blockdim value (integer or tuple) to a dim3 tuple."""
    if isinstance(ty, types.BaseTuple):
        items = [
            _to_u32(context, builder, t, builder.extract_value(val, i))
            for i, t in enumerate(ty)
        ]
    else:
        items = [_to_u32(context, builder, ty, val)]
    items += [ir.Constant(ir.IntType(32), 1)] * (3 - len(items))
    return context.make_tuple(builder, _dim3, items)


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
    cfg.grid = dim3_from_value(context, builder, item_types[0], items[0])
    cfg.block = dim3_from_value(context, builder, item_types[1], items[1])
    if len(items) > 2:
        cfg.stream = stream_handle_value(context, builder, item_types[2], items[2])
    else:
        cfg.stream = ir.Constant(ir.IntType(8).as_pointer(), None)
    if len(items) > 3:
        cfg.sharedmem = _to_u32(context, builder, item_types[3], items[3])
    else:
        cfg.sharedmem = ir.Constant(ir.IntType(32), 0)
    return cfg._getvalue()
