// Device functions numba-cuda 0.30 has no intrinsics for, linked into
// kernels with cuda.jit(link=[...]) and declared with cuda.declare_device.
// numba-cuda's ABI for foreign device functions: the result is written
// through the first parameter; the int returned is a status (0).

// Thread-block cluster special registers (PTX ISA 7.8, sm_90).
extern "C" __device__ int ncl_cluster_ctarank(unsigned int *out) {
    unsigned int r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    *out = r;
    return 0;
}

extern "C" __device__ int ncl_cluster_nctarank(unsigned int *out) {
    unsigned int r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    *out = r;
    return 0;
}

extern "C" __device__ int ncl_clusterid_x(unsigned int *out) {
    unsigned int r;
    asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
    *out = r;
    return 0;
}

// Programmatic dependent launch, device side (sm_90): wait for the
// preceding kernel's memory, and let the next kernel start early.
extern "C" __device__ int ncl_grid_dependency_wait(int *out) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    *out = 0;
    return 0;
}

extern "C" __device__ int ncl_launch_dependents(int *out) {
    asm volatile("griddepcontrol.launch_dependents;" :::);
    *out = 0;
    return 0;
}
