"""``kernel[griddim, blockdim, stream, sharedmem, cluster]`` in CPU nopython code:
the configured kernel's type (:class:`LaunchConfig`) and model, the typing and
lowering of the ``getitem`` that makes one. Calling it is :mod:`.call`'s.
See docs/architecture.md.
"""

import operator
import re
from typing import NamedTuple

from llvmlite import ir
from numba.core import cgutils, types
from numba.core.datamodel import default_manager
from numba.core.imputils import lower_constant
from numba.extending import lower_builtin, models, register_model
from numba.core.typing.templates import AbstractTemplate, infer, signature

from numba_cuda_launch.compat import numba_cuda as _compat
from numba_cuda_launch.compat.numba_cuda import CUDADispatcherType as CUDADispatcher
from numba_cuda_launch.errors import KernelTypingError, explain_lines, register_typer
from numba_cuda_launch.launch.selection import compiler_for, launch_signature
from numba_cuda_launch.launch.stream import is_stream_type, stream_handle_value

__all__ = ["LaunchConfig", "dim3_from_value", "ConfigValues", "config_values", "launch_dims",
           "cluster_dims", "CONFIG_OK",
           "BAD_GRIDDIM", "BAD_BLOCKDIM", "BAD_SHAREDMEM", "BAD_CLUSTER",
           "BAD_CLUSTER_GRID", "CONFIG_PROBLEMS", "CLUSTER_MIN_CC"]

_u32 = types.uint32
_dim3 = types.UniTuple(_u32, 3)
_U32_MAX = 0xFFFFFFFF

#: Values of a configuration's ``problem`` field: which run-time item was out
#: of the driver's range; such a launch is refused, never given another value.
CONFIG_OK, BAD_GRIDDIM, BAD_BLOCKDIM, BAD_SHAREDMEM = 0, -1, -2, -3
BAD_CLUSTER, BAD_CLUSTER_GRID = -4, -5
CONFIG_PROBLEMS = {
    BAD_GRIDDIM: "griddim has an item outside 1..2**32-1",
    BAD_BLOCKDIM: "blockdim has an item outside 1..2**32-1",
    BAD_SHAREDMEM: "sharedmem is outside 0..2**32-1 bytes",
    BAD_CLUSTER: "cluster has an item outside 1..2**32-1",
    BAD_CLUSTER_GRID: "griddim is not a multiple of the cluster dimensions in every "
                      "direction (the grid is made of whole clusters)",
}
#: Thread-block clusters need this compute capability or newer (Hopper).
CLUSTER_MIN_CC = (9, 0)


def _kernel_name(dispatcher):
    return compiler_for(dispatcher).kernel_name(dispatcher)


class LaunchConfig(types.Callable):
    """A kernel with its launch configuration: the value of
    ``kernel[griddim, blockdim, stream, sharedmem]``.

    Every configuration of one kernel has this one type, so configurations
    made at run time can be kept in a variable, merged across branches and
    called several times.
    """

    def __init__(self, dispatcher_type):
        self.dispatcher_type = dispatcher_type
        self.kernel_name = _kernel_name(dispatcher_type.dispatcher)
        super().__init__(name="LaunchConfig(%s)" % self.kernel_name)

    @property
    def key(self):
        return self.dispatcher_type

    @property
    def dispatcher(self):
        return self.dispatcher_type.dispatcher

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
            # Thread-block cluster dimensions; (0, 0, 0) when none was given
            # (then the launch is a plain cuLaunchKernel).
            ("cluster", _dim3),
        ]
        super().__init__(dmm, fe_type, members)


# A kernel used as a global or closure variable in CPU code: numba-cuda
# registers the data model of its dispatcher type only for the CUDA target.
# The value carries nothing at run time (the kernel is known from its type).
if CUDADispatcher not in default_manager._handlers:
    register_model(CUDADispatcher)(models.OpaqueModel)


#: Types of kernels ``kernel[...]`` configures (the simulator adds its own).
KERNEL_TYPES = (CUDADispatcher,)


@explain_lines
def _kernel_attribute(line):
    """Attributes of a kernel (``kernel.configure``, ``kernel.forall``) in
    nopython code: a sentence naming the kernel and the way to launch it
    leads Numba's "Unknown attribute" (a template raising instead would
    break ``hasattr``)."""
    m = _KERNEL_ATTRIBUTE.match(line)
    if m is None:
        return None
    attr, name = m.group(1), m.group(2).rpartition(".")[2]
    return ("kernel %r: .%s is not available in compiled code; launch the kernel with "
            "%s[griddim, blockdim](args...) (or [griddim, blockdim, stream, sharedmem])"
            % (name, attr, name))


_KERNEL_ATTRIBUTE = re.compile(
    r"Unknown attribute '([^']+)' of type type\(CUDADispatcher\(<function ([\w.<>]+) at ")


class KernelType(types.Type):
    """The CPU type of a kernel Numba does not type itself; like numba-cuda's
    dispatcher type it holds the kernel (``.dispatcher``)."""

    def __init__(self, dispatcher, name):
        self.dispatcher = dispatcher
        super().__init__(name=name)

    @property
    def key(self):
        return self.dispatcher


def _no_value(context, builder, ty, pyval):
    return context.get_dummy_value()


def add_kernel_type(ty):
    """Let ``kernel[...]`` configure kernels of type class *ty* too; their
    values carry nothing at run time (the kernel is known from the type)."""
    global KERNEL_TYPES
    KERNEL_TYPES = KERNEL_TYPES + (ty,)
    register_model(ty)(models.OpaqueModel)
    lower_constant(ty)(_no_value)
    lower_builtin(operator.getitem, ty, types.Any)(lower_kernel_configure)


def _items(item):
    """The items of a configuration entry (a type, or a constant's value):
    a tuple's, else the entry alone."""
    return list(item) if isinstance(item, (tuple, types.BaseTuple)) else [item]


def _padded(values):
    """Constant dimensions padded to three with 1 (None where not a constant)."""
    return [v if isinstance(v, int) else None for v in values] + [1] * (3 - len(values))


def _check_dim(kernel, what, ty):
    """Typing check of a griddim/blockdim item: an integer or a tuple of 1-3
    integers, positive where known at compile time."""
    items = _items(ty)
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


def check_cluster_grid(kernel, grid, cluster):
    """Refuse constant grid and cluster dimensions where the grid is not
    made of whole clusters (lists of three items, None when not constant)."""
    for axis, g, c in zip("xyz", grid, cluster):
        if isinstance(g, int) and isinstance(c, int) and c > 0 and g % c:
            raise KernelTypingError(
                "kernel %r: griddim must be a multiple of the cluster dimensions; "
                "along %s the grid has %d blocks and the cluster %d" % (kernel, axis, g, c))


def _check_cluster(dispatcher, name, ty, grid_ty):
    _check_dim(name, "cluster", ty)
    if _compat.is_simulated(dispatcher):
        raise KernelTypingError(
            "kernel %r: thread-block clusters (the fifth configuration item) are not "
            "simulated by numba-cuda's CUDA simulator" % name)
    cc = _compat.target_compute_capability()
    if cc is not None and tuple(cc) < CLUSTER_MIN_CC:
        raise KernelTypingError(
            "kernel %r: thread-block clusters need compute capability %d.%d or newer; "
            "kernels are built for %d.%d here" % ((name,) + CLUSTER_MIN_CC + tuple(cc)))
    grid, cluster = ([getattr(t, "literal_value", None) for t in _items(d)] for d in (grid_ty, ty))
    check_cluster_grid(name, _padded(grid), _padded(cluster))


def check_config_types(dispatcher, index_types):
    """Raise a KernelTypingError naming the kernel unless *index_types* is a
    valid ``(griddim, blockdim[, stream[, sharedmem[, cluster]]])``."""
    name = _kernel_name(dispatcher)
    if compiler_for(dispatcher).is_device_function(dispatcher):
        raise KernelTypingError(
            "%r is a CUDA device function (cuda.jit(device=True)); only "
            "kernels can be launched with [griddim, blockdim, ...]" % name
        )
    if not 2 <= len(index_types) <= 5:
        raise KernelTypingError(
            "kernel %r: a launch configuration is [griddim, blockdim], "
            "[griddim, blockdim, stream], [griddim, blockdim, stream, "
            "sharedmem] or [griddim, blockdim, stream, sharedmem, cluster]; "
            "got %d item(s)" % (name, len(index_types))
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
    if len(index_types) > 4:
        _check_cluster(dispatcher, name, index_types[4], index_types[0])


def _is_configure(args, kws):
    """Whether *args* are a kernel and an index."""
    return len(args) == 2 and not kws and isinstance(args[0], KERNEL_TYPES)


def _configure_signature(context, args, kws):
    """The signature of ``kernel[index]``; raises KernelTypingError for a
    bad configuration, None when *args* are not a kernel and an index."""
    if not _is_configure(args, kws):
        return None
    disp_ty, index = args
    check_config_types(disp_ty.dispatcher, _items(index))
    return signature(LaunchConfig(disp_ty), disp_ty, index)


register_typer(operator.getitem, _configure_signature, KernelTypingError)


@infer
class KernelConfigureLiteralCheck(AbstractTemplate):
    """Checks constant configurations (``kernel[-1, 32]``) against their
    literal values; typing itself falls through to ``getitem`` above."""

    key = "static_getitem"
    metadata = {"target": "cpu"}

    def generic(self, args, kws):
        if not _is_configure(args, kws):
            return None
        items = _items(args[1])
        name = _kernel_name(args[0].dispatcher)
        for what, item in zip(("griddim", "blockdim"), items):
            for v in _items(item):
                _check_constant(name, what, v)
        if len(items) > 3:
            _check_constant(name, "sharedmem", items[3])
        if len(items) > 4:
            grid, cluster = _items(items[0]), _items(items[4])
            for v in cluster:
                _check_constant(name, "cluster", v)
            if len(cluster) <= 3 and len(grid) <= 3:
                check_cluster_grid(name, _padded(grid), _padded(cluster))
        return None


def _to_u32(context, builder, ty, val, low):
    """``(value as u32, low <= value < 2**32)``, checked before truncating."""
    cmp = builder.icmp_signed if ty.signed else builder.icmp_unsigned
    if ty.bitwidth < 32 or (not ty.signed and ty.bitwidth == 32):
        return context.cast(builder, val, ty, types.uint32), cmp(">=", val, val.type(low))
    wide = context.cast(builder, val, ty, types.int64 if ty.signed else types.uint64)
    ok = builder.and_(cmp(">=", wide, wide.type(low)), cmp("<=", wide, wide.type(_U32_MAX)))
    return builder.trunc(wide, ir.IntType(32)), ok


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


def cluster_dims(builder, cfg):
    """``(given, [x, y, z])``: whether the configuration has a cluster (an
    ``i1``) and its three dimensions."""
    dims = [builder.extract_value(cfg.cluster, i) for i in range(3)]
    return builder.icmp_unsigned("!=", dims[0], ir.Constant(ir.IntType(32), 0)), dims


class ConfigValues(NamedTuple):
    """A configuration's values as a backend takes them (LLVM values)."""

    #: grid x, y, z, block x, y, z (``i32``), in ``cuLaunchKernel``'s order
    dims: list
    sharedmem: ir.Value
    stream: ir.Value
    #: an ``i1``: a thread-block cluster was given
    has_cluster: ir.Value
    #: its x, y, z (0 when none was given)
    cluster: list


def config_values(builder, cfg):
    """The :class:`ConfigValues` of a configuration struct proxy."""
    has_cluster, cluster = cluster_dims(builder, cfg)
    return ConfigValues(launch_dims(builder, cfg), cfg.sharedmem, cfg.stream, has_cluster,
                        cluster)


def _whole_clusters(builder, grid, cluster, cluster_ok):
    """An ``i1``: every grid dimension is a multiple of the cluster's (true
    when the cluster is out of range, which is reported instead)."""
    u32 = ir.IntType(32)
    ok = cgutils.true_bit
    for i in range(3):
        g = builder.extract_value(grid, i)
        c = builder.extract_value(cluster, i)
        divisor = builder.select(cluster_ok, c, ir.Constant(u32, 1))  # never 0
        ok = builder.and_(ok, builder.icmp_unsigned(
            "==", builder.urem(g, divisor), ir.Constant(u32, 0)))
    return builder.or_(ok, builder.not_(cluster_ok))


@lower_builtin(operator.getitem, CUDADispatcher, types.Any)
def lower_kernel_configure(context, builder, sig, args):
    _disp, index = args
    index_ty = sig.args[1]
    item_types = _items(index_ty)
    items = ([builder.extract_value(index, i) for i in range(len(item_types))]
             if isinstance(index_ty, types.BaseTuple) else [index])
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
    if len(items) > 4:
        cfg.cluster, cluster_ok = dim3_from_value(context, builder, item_types[4], items[4])
        whole = _whole_clusters(builder, cfg.grid, cfg.cluster, cluster_ok)
    else:
        cfg.cluster = ir.Constant(context.get_value_type(_dim3), None)
        cluster_ok = whole = cgutils.true_bit
    # The first item out of range, else CONFIG_OK.
    problem = builder.select(whole, ir.Constant(i32, CONFIG_OK), ir.Constant(i32, BAD_CLUSTER_GRID))
    problem = builder.select(cluster_ok, problem, ir.Constant(i32, BAD_CLUSTER))
    problem = builder.select(shmem_ok, problem, ir.Constant(i32, BAD_SHAREDMEM))
    problem = builder.select(block_ok, problem, ir.Constant(i32, BAD_BLOCKDIM))
    cfg.problem = builder.select(grid_ok, problem, ir.Constant(i32, BAD_GRIDDIM))
    return cfg._getvalue()
