"""The driver's own answers, asked from Python through cuda.bindings, for
GPU tests to compare compiled code's answers with: a kernel's
``CUfunction`` in numba-cuda's primary context and the occupancy of
clusters."""

from numba import cuda


def cufunction(dispatcher, argtypes):
    """The ``CUfunction`` of *dispatcher*'s overload for *argtypes* (through
    ``kernel_handle``), in numba-cuda's primary context (made current)."""
    from cuda.bindings import driver as drv

    import numba_cuda_launch as ncl

    cuda.current_context()
    handle = ncl.kernel_handle(dispatcher, argtypes).handle
    err, func = drv.cuKernelGetFunction(drv.CUkernel(handle))
    assert err == drv.CUresult.CUDA_SUCCESS
    return func


def max_active_clusters(func, grid, block, sharedmem, cluster_x):
    """``cuOccupancyMaxActiveClusters`` for a 1-D launch of *func* with
    clusters of *cluster_x* blocks."""
    from cuda.bindings import driver as drv

    config = drv.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid, 1, 1
    config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
    config.sharedMemBytes = sharedmem
    attr = drv.CUlaunchAttribute()
    attr.id = drv.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster_x, 1, 1
    config.attrs = [attr]
    config.numAttrs = 1
    err, count = drv.cuOccupancyMaxActiveClusters(func, config)
    assert err == drv.CUresult.CUDA_SUCCESS
    return count
