"""Dynamic shared memory above 48 KiB on a GPU: kernels of numba-cuda and a
foreign (PTX) kernel launched from @njit with 100 KiB of dynamic shared
memory, each block reversing its chunk through shared memory; checked
against NumPy on fresh random data, outputs poisoned first."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from support.nvrtc import nvrtc_ptx

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()

CHUNK = 100 * 1024 // 4  # float32 items in 100 KiB
SHARED = CHUNK * 4


@cuda.jit
def reverse_chunks(x, out, chunk):
    s = cuda.shared.array(0, numba.float32)
    base = cuda.blockIdx.x * chunk
    for i in range(cuda.threadIdx.x, chunk, cuda.blockDim.x):
        s[i] = x[base + i]
    cuda.syncthreads()
    for i in range(cuda.threadIdx.x, chunk, cuda.blockDim.x):
        out[base + i] = s[chunk - 1 - i]


REVERSE = r'''
extern "C" __global__ void reverse_chunks_c(const float* x, float* out, int chunk)
{
    extern __shared__ float s[];
    long long base = (long long)blockIdx.x * chunk;
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) s[i] = x[base + i];
    __syncthreads();
    for (int i = threadIdx.x; i < chunk; i += blockDim.x) out[base + i] = s[chunk - 1 - i];
}
'''


def expected(x):
    return x.reshape(-1, CHUNK)[:, ::-1].ravel()


def run(kernel, blocks, x, chunk_arg):
    @njit
    def go(x, out, stream):
        kernel[blocks, 256, stream, SHARED](x, out, chunk_arg)
        # smaller and equal sizes afterwards: no new opt-in needed
        kernel[blocks, 256, stream, SHARED](x, out, chunk_arg)

    d_x = cuda.to_device(x)
    d_out = cuda.to_device(np.full_like(x, np.nan))
    stream = cuda.stream()
    go(d_x, d_out, stream)
    stream.synchronize()
    return d_out.copy_to_host()


def test_numba_cuda_kernel_with_100_kib_of_dynamic_shared_memory():
    blocks = 7
    x = rng.standard_normal(blocks * CHUNK).astype(np.float32)
    np.testing.assert_array_equal(run(reverse_chunks, blocks, x, CHUNK), expected(x))


def test_foreign_kernel_with_100_kib_of_dynamic_shared_memory():
    cc = cuda.get_current_device().compute_capability
    k = ncl.foreign_kernel(nvrtc_ptx(REVERSE, ("-arch=compute_%d%d" % cc,), "reverse_chunks_c"),
                           "reverse_chunks_c", "void(CPointer(float32), CPointer(float32), int32)")
    blocks = 5
    x = rng.standard_normal(blocks * CHUNK).astype(np.float32)
    np.testing.assert_array_equal(run(k, blocks, x, np.int32(CHUNK)), expected(x))


def test_more_than_the_device_allows_is_refused_with_the_reason():
    optin = cuda.get_current_device().MAX_SHARED_MEMORY_PER_BLOCK_OPTIN

    @njit
    def go(x, out, n):
        reverse_chunks[1, 32, 0, n](x, out, 1)

    d_x = cuda.to_device(np.ones(4, np.float32))
    with pytest.raises(ncl.CudaLaunchError) as info:
        go(d_x, d_x, optin + 4)
    assert "CUDA_ERROR_INVALID_VALUE" in str(info.value)
    assert "more dynamic shared memory than the device gives a block" in str(info.value)
