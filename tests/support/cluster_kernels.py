"""Kernels reading their thread-block cluster (Hopper, sm_90) through CUDA C
device functions linked with ``cuda.jit(link=[...])``: numba-cuda 0.30 has
no cluster intrinsics. Shared by the CPU tests (compiled with NVRTC, no GPU
needed) and the GPU tests."""

import os

from numba import cuda

CU_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cluster_rank.cu")

cluster_ctarank = cuda.declare_device("ncl_cluster_ctarank", "uint32()")
cluster_nctarank = cuda.declare_device("ncl_cluster_nctarank", "uint32()")
clusterid_x = cuda.declare_device("ncl_clusterid_x", "uint32()")
grid_dependency_wait = cuda.declare_device("ncl_grid_dependency_wait", "int32()")
launch_dependents = cuda.declare_device("ncl_launch_dependents", "int32()")


@cuda.jit(link=[CU_FILE])
def cluster_info(out):
    """out[block] = (rank in its cluster, blocks in the cluster, cluster x)."""
    if cuda.threadIdx.x == 0:
        b = cuda.blockIdx.x + cuda.gridDim.x * (cuda.blockIdx.y + cuda.gridDim.y * cuda.blockIdx.z)
        out[b, 0] = cluster_ctarank()
        out[b, 1] = cluster_nctarank()
        out[b, 2] = clusterid_x()


@cuda.jit(link=[CU_FILE])
def dependent_copy(x, y):
    """A programmatic-dependent-launch consumer: y = x once the producer's
    writes are visible (griddepcontrol.wait)."""
    grid_dependency_wait()
    i = cuda.grid(1)
    if i < x.size:
        y[i] = x[i]
    launch_dependents()
