"""``cuLaunchKernelEx`` and its launch attributes, built on the stack.

Launches that need attributes (thread-block clusters, the cooperative
attribute with a cluster) fill a ``CUlaunchConfig`` and its attribute array
in stack slots of the calling function at each launch: nothing is allocated.
``cuOccupancyMaxActiveClusters`` takes the same config (docs/graphs.md).
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver

__all__ = ["ATTRIBUTE_COOPERATIVE", "ATTRIBUTE_CLUSTER_DIMENSION",
           "launch_config_type", "launch_attribute_type", "emit_launch_config",
           "emit_launch_ex"]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)

#: CUlaunchAttributeID values used here.
ATTRIBUTE_COOPERATIVE = 2
ATTRIBUTE_CLUSTER_DIMENSION = 4


def launch_config_type():
    """``CUlaunchConfig`` (CUDA 12 and 13, 64-bit): grid x/y/z, block x/y/z,
    sharedMemBytes (``unsigned``), hStream, attrs, numAttrs (56 bytes)."""
    return ir.LiteralStructType([_i32] * 7 + [_i8p, _i8p, _i32])


def launch_attribute_type():
    """``CUlaunchAttribute``: the id (``i32``), 4 bytes of padding and a
    64-byte value union holding pointers, so eight ``i64`` (72 bytes)."""
    return ir.LiteralStructType([_i32, ir.ArrayType(ir.IntType(8), 4),
                                 ir.ArrayType(ir.IntType(64), 8)])


def _attribute_value(builder, attrs, index, attr_id):
    """Zero attribute *index* of *attrs*, set its id; returns an ``i32*`` to
    the start of its value."""
    slot = cgutils.gep_inbounds(builder, attrs, 0, index)
    builder.store(ir.Constant(launch_attribute_type(), None), slot)
    builder.store(ir.Constant(_i32, attr_id), cgutils.gep_inbounds(builder, slot, 0, 0))
    return builder.bitcast(cgutils.gep_inbounds(builder, slot, 0, 2), _i32.as_pointer())


def emit_launch_config(builder, dims, sharedmem, stream, cluster=None, cooperative=False):
    """Fill a stack ``CUlaunchConfig`` and return it as ``i8*``.

    *dims*: the six ``i32`` dimensions (grid x, y, z, block x, y, z);
    *cluster*: three ``i32`` cluster dimensions, or None for no cluster
    attribute; *cooperative*: add ``CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 1``.
    """
    config = cgutils.alloca_once(builder, launch_config_type(), name="launch_config")
    attrs = cgutils.alloca_once(builder, ir.ArrayType(launch_attribute_type(), 2),
                                name="launch_attributes")
    count = 0
    if cluster is not None:
        value = _attribute_value(builder, attrs, count, ATTRIBUTE_CLUSTER_DIMENSION)
        for i, d in enumerate(cluster):
            builder.store(d, builder.gep(value, [ir.Constant(_i32, i)], inbounds=True))
        count += 1
    if cooperative:
        value = _attribute_value(builder, attrs, count, ATTRIBUTE_COOPERATIVE)
        builder.store(ir.Constant(_i32, 1), value)
        count += 1
    fields = list(dims) + [sharedmem, stream,
                           builder.bitcast(attrs, _i8p) if count else ir.Constant(_i8p, None),
                           ir.Constant(_i32, count)]
    for i, v in enumerate(fields):
        builder.store(v, cgutils.gep_inbounds(builder, config, 0, i))
    return builder.bitcast(config, _i8p)


def emit_launch_ex(builder, func, dims, sharedmem, stream, params, cluster=None,
                   cooperative=False):
    """``cuLaunchKernelEx`` of *func* (a ``CUkernel`` or ``CUfunction``) with
    the attributes :func:`emit_launch_config` takes; returns the
    ``CUresult``."""
    config = emit_launch_config(builder, dims, sharedmem, stream, cluster, cooperative)
    extra = ir.Constant(_i8p.as_pointer(), None)
    return driver.call(builder, "cuLaunchKernelEx", [config, func, params, extra])
