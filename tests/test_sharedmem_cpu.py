"""Dynamic shared memory above 48 KiB without a GPU: launches of every kernel
source against the recording driver, whose fake device refuses a launch
above a kernel's limit as the driver does (48 KiB less the kernel's static
shared memory until raised, at most 227 KiB less it). Checked: the limit is
raised once per kernel and device (cuKernelSetAttribute), only when a launch
needs it, to the device's maximum; a size beyond that is refused with the
reason, before the driver is asked to launch."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from support.cold_path import CountingDriver
from support.nvrtc import nvrtc_ptx
from numba_cuda_launch.testing import RecordingDriver

KIB = 1024
OPTIN = 227 * KIB  # the fake device's CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
MAX_DYNAMIC = 8  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


def make_numba_cuda():
    @cuda.jit
    def dyn(x):
        s = cuda.shared.array(0, numba.float32)
        s[cuda.threadIdx.x] = x[cuda.threadIdx.x]
        x[cuda.threadIdx.x] = s[0]
    return dyn, "dyn"


def make_foreign():
    src = r'''extern "C" __global__ void fdyn(float* x)
    { extern __shared__ float s[]; s[threadIdx.x] = x[threadIdx.x]; x[threadIdx.x] = s[0]; }'''
    return ncl.foreign_kernel(nvrtc_ptx(src, ("-arch=compute_90",), "fdyn"), "fdyn",
                              "void(CPointer(float32))"), "fdyn"


def make_mlir():
    pytest.importorskip("numba_cuda_mlir")
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit
    def mdyn(x):
        x[mcuda.threadIdx.x] = 1.0
    return mdyn, None  # its entry is a mangled name


SOURCES = {"numba-cuda": make_numba_cuda, "foreign": make_foreign, "numba-cuda-mlir": make_mlir}


def launcher(kernel):
    @njit
    def go(p, shm):
        x = numba.carray(ncl.as_voidptr(p), (32,), np.float32)
        return kernel[1, 32, 0, shm].launch_status(x)

    @njit
    def go_raising(p, shm):
        x = numba.carray(ncl.as_voidptr(p), (32,), np.float32)
        kernel[1, 32, 0, shm](x)
    return go, go_raising


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_limit_raised_once_only_above_48_kib(source):
    kernel, _ = SOURCES[source]()
    go, _ = launcher(kernel)
    sizes = [0, 1024, 48 * KIB, 100 * KIB, 90 * KIB, 100 * KIB, OPTIN, 64]
    with RecordingDriver() as rec:
        statuses = []
        for size in sizes:
            statuses.append(go(0x1000, size))
            if size == 48 * KIB:
                assert rec.kernel_attributes == []  # nothing needed so far
    assert statuses == [0] * len(sizes)
    assert [l.sharedmem for l in rec.launches] == sizes
    (name,) = {l.kernel for l in rec.launches}
    # once, to the device's maximum for the kernel, on device 0
    assert rec.kernel_attributes == [(name, MAX_DYNAMIC, OPTIN, 0)]


def test_static_shared_memory_lowers_the_threshold():
    kernel, _ = make_numba_cuda()
    go, _ = launcher(kernel)
    with RecordingDriver() as rec:
        assert go(0x1000, 0) == 0
        name = rec.launches[0].kernel
        rec.static_shared[name] = 16 * KIB
        assert go(0x1000, 32 * KIB) == 0 and rec.kernel_attributes == []
        assert go(0x1000, 40 * KIB) == 0  # 40 + 16 > 48 KiB: raised
    assert rec.kernel_attributes == [(name, MAX_DYNAMIC, OPTIN - 16 * KIB, 0)]


def test_more_than_the_device_allows_is_refused_with_the_reason():
    kernel, _ = make_numba_cuda()
    go, go_raising = launcher(kernel)
    with RecordingDriver() as rec:
        assert go(0x1000, OPTIN + 4) == 1  # CUDA_ERROR_INVALID_VALUE
        with pytest.raises(ncl.CudaLaunchError) as info:
            go_raising(0x1000, 228 * KIB)
    assert rec.launches == [] and rec.kernel_attributes == []
    text = str(info.value)
    assert "kernel 'dyn'" in text and "CUDA_ERROR_INVALID_VALUE" in text
    assert ("sharedmem is more dynamic shared memory than the device gives a block of this "
            "kernel (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN less the kernel's "
            "static shared memory") in text


def test_each_device_is_raised_once():
    kernel, _ = make_numba_cuda()
    go, _ = launcher(kernel)
    with RecordingDriver() as rec:
        rec.device_count = 2
        assert go(0x1000, 100 * KIB) == 0  # device 0 (its primary context)
        assert go(0x1000, 100 * KIB) == 0  # device 1 unknown: asked, not raised again
        rec._thread.ctx = 0xC1  # the fake's primary context of device 1
        assert go(0x1000, 120 * KIB) == 0
        assert go(0x1000, 100 * KIB) == 0
        rec._thread.ctx = 0xC0
        assert go(0x1000, 200 * KIB) == 0
    name = rec.launches[0].kernel
    assert rec.kernel_attributes == [(name, MAX_DYNAMIC, OPTIN, 0), (name, MAX_DYNAMIC, OPTIN, 1)]
    assert len(rec.launches) == 5


def test_occupancy_query_above_48_kib_raises_the_limit():
    kernel, _ = make_numba_cuda()

    @njit
    def blocks(p):
        x = numba.carray(ncl.as_voidptr(p), (32,), np.float32)
        return kernel[1, 128, 0, 100 * KIB].max_active_blocks(x)

    with RecordingDriver() as rec:
        assert blocks(0x1000) == rec.occupancy(128, 100 * KIB)
    (q,) = rec.occupancy_queries
    assert q.sharedmem == 100 * KIB
    assert rec.kernel_attributes == [(q.kernel, MAX_DYNAMIC, OPTIN, 0)]


def test_triton_kernel_above_48_kib_is_accepted():
    from test_kernel_sources_cpu import fake_triton

    k = ncl.foreign_kernel(fake_triton(shared=100000))
    assert k.sharedmem == 100000

    shared = k.sharedmem

    @njit
    def go(x, out, n):
        return k[1, 128, 0, shared].launch_status(x, out, n)

    with RecordingDriver() as rec:
        assert go(0x1000, 0x2000, 64) == 0
    assert rec.launches[0].sharedmem == 100000
    assert rec.kernel_attributes == [("add_kernel", MAX_DYNAMIC, OPTIN, 0)]


@pytest.mark.parametrize("device", [0, 1])
def test_one_device_of_two_takes_no_cold_path_after_its_first_launch(device):
    # A process using one GPU of two never learns the other's limit: its
    # launches ask the driver for the current device and compare with that
    # device's limit (before, each took the cold path: attribute queries).
    kernel, _ = make_numba_cuda()
    go, _ = launcher(kernel)
    with CountingDriver() as rec:
        rec.device_count = 2
        rec._thread.ctx = 0xC0 + device  # the fake's primary context of the device
        assert go(0x1000, 100 * KIB) == 0  # first: the limit raised on this device
        first = rec.cold_queries
        assert first > 0
        for size in (100 * KIB, 4 * KIB, 200 * KIB, 64):
            assert go(0x1000, size) == 0
        assert rec.cold_queries == first
    name = rec.launches[0].kernel
    assert rec.kernel_attributes == [(name, MAX_DYNAMIC, OPTIN, device)]
    assert [l.sharedmem for l in rec.launches] == [100 * KIB, 100 * KIB, 4 * KIB, 200 * KIB, 64]


def test_a_device_not_yet_seen_takes_the_cold_path():
    # the guard of the test above: device 1's limit is unknown after device
    # 0's launch, so its first launch asks (and raises its limit)
    kernel, _ = make_numba_cuda()
    go, _ = launcher(kernel)
    with CountingDriver() as rec:
        rec.device_count = 2
        assert go(0x1000, 100 * KIB) == 0
        first = rec.cold_queries
        rec._thread.ctx = 0xC1
        assert go(0x1000, 100 * KIB) == 0
        assert rec.cold_queries > first
