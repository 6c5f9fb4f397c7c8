"""Occupancy queries at run time, emitted for compiled code (docs/graphs.md).

Each takes the ``CUfunction`` of a kernel in the current context (the launch
layer gets it with ``cuKernelGetFunction``, which loads the kernel there) and
returns the ``CUresult`` with the driver's answer.
"""

from llvmlite import ir
from numba.core import cgutils

from numba_cuda_launch.cudadrv import driver
from numba_cuda_launch.cudadrv.launch import emit_launch_config

__all__ = ["emit_max_active_blocks", "emit_max_potential_block_size",
           "emit_max_active_clusters"]

_i8p = ir.IntType(8).as_pointer()
_i32 = ir.IntType(32)
_i64 = ir.IntType(64)


def emit_max_active_blocks(builder, func, block_size, sharedmem):
    """``(status, blocks)``: how many blocks of *block_size* threads (``i32``)
    using *sharedmem* bytes (``i32``, unsigned) of dynamic shared memory can
    be resident on one multiprocessor."""
    out = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    status = driver.call(builder, "cuOccupancyMaxActiveBlocksPerMultiprocessor",
                         [out, func, block_size, builder.zext(sharedmem, _i64)])
    return status, builder.load(out)


def emit_max_potential_block_size(builder, func, sharedmem, block_size_limit):
    """``(status, min_grid_size, block_size)``: the block size reaching the
    highest occupancy with *sharedmem* bytes of dynamic shared memory per
    block, and the smallest grid that fills the device with it.
    *block_size_limit* (``i32``) caps the block size (0: the kernel's
    limit)."""
    grid = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    block = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    status = driver.call(builder, "cuOccupancyMaxPotentialBlockSize",
                         [grid, block, func, ir.Constant(_i8p, None),
                          builder.zext(sharedmem, _i64), block_size_limit])
    return status, builder.load(grid), builder.load(block)


def emit_max_active_clusters(builder, func, dims, sharedmem, stream, cluster):
    """``(status, clusters)``: how many clusters of *cluster* dimensions
    (three ``i32``, or None to use the kernel's compile-time cluster size)
    can be resident at once for the launch *dims* (grid x, y, z, block x, y,
    z) describes."""
    config = emit_launch_config(builder, dims, sharedmem, stream, cluster)
    out = cgutils.alloca_once_value(builder, ir.Constant(_i32, 0))
    status = driver.call(builder, "cuOccupancyMaxActiveClusters", [out, func, config])
    return status, builder.load(out)
