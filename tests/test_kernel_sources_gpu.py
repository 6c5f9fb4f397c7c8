"""Kernels from other compilers on a GPU (docs/kernel-sources.md): each
source launched from @njit and from @cfunc (through ctypes), outputs
poisoned with NaN first and compared with NumPy; a CuPy RawKernel launched
by CuPy and from @njit gives the same result; a graph replay. Kernels
CuPy and cuda.core loaded launch through their own handles (the binary
that library loaded), checked against the driver's parameter sizes."""

import ctypes

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cfunc, cuda, njit
from numba.core import types as nt

import numba_cuda_launch as ncl
from numba_cuda_launch import graphs

pytestmark = pytest.mark.gpu

SRC = r'''
extern "C" __global__ void axpy(float* y, const float* x, float a, long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) y[i] = a * x[i] + y[i]; }
'''
SIG = "void(CPointer(float32), CPointer(float32), float32, int64)"
N = 1000


def arch():
    return "sm_%d%d" % cuda.get_current_device().compute_capability


def object_code(kind="cubin"):
    from cuda.core import Program, ProgramOptions

    return Program(SRC, "c++", ProgramOptions(arch=arch())).compile(kind)


def inputs(rng):
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    return x, y, np.float32(rng.uniform(0.5, 2.0))


def launch_njit(kernel, x, y, a):
    dx, dy = cuda.to_device(x), cuda.to_device(y)

    @njit
    def go(yv, xv, a, n):
        kernel[(n + 127) // 128, 128](yv, xv, a, n)

    go(dy, dx, a, N)
    cuda.synchronize()
    return dy.copy_to_host()


def launch_cfunc(kernel, x, y, a):
    dx, dy = cuda.to_device(x), cuda.to_device(y)

    @cfunc(nt.int32(nt.voidptr, nt.voidptr, nt.float32, nt.int64))
    def go(yp, xp, a, n):
        return kernel[(n + 127) // 128, 128].launch_status(yp, xp, a, n)

    ptr = lambda d: d.__cuda_array_interface__["data"][0]  # noqa: E731
    assert go.ctypes(ptr(dy), ptr(dx), ctypes.c_float(a), N) == 0
    cuda.synchronize()
    return dy.copy_to_host()


@njit
def _launch_given(kernel, yv, xv, a, n):
    kernel[(n + 127) // 128, 128](yv, xv, a, n)


def launch_as_argument(kernel, x, y, a):
    """The kernel passed into the @njit function as an argument."""
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    _launch_given(kernel, dy, dx, a, N)
    cuda.synchronize()
    return dy.copy_to_host()


def ptx_with_an_entry_commented_out():
    """axpy's PTX with an older axpy of other parameters commented out
    before it: the driver, and foreign_kernel(), read the real one."""
    ptx = bytes(object_code("ptx").code).rstrip(b"\0").decode()
    at = ptx.index(".visible .entry axpy(")
    old = "/* .visible .entry axpy(\n\t.param .u64 p0,\n\t.param .b32 p1\n) */\n" \
          "// .visible .entry axpy(.param .b16 p0)\n"
    return ptx[:at] + old + ptx[at:]


KERNELS = {
    "PTX with an entry commented out":
        lambda: ncl.foreign_kernel(ptx_with_an_entry_commented_out(), "axpy", SIG),
    "cubin bytes": lambda: ncl.foreign_kernel(object_code().code, "axpy", SIG),
    "cuda.core ObjectCode": lambda: ncl.foreign_kernel(object_code(), "axpy", SIG),
    "PTX text": lambda: ncl.foreign_kernel(object_code("ptx").code, "axpy", SIG),
}


@pytest.mark.parametrize("source", sorted(KERNELS))
@pytest.mark.parametrize("launch", [launch_njit, launch_cfunc, launch_as_argument])
def test_source_end_to_end(source, launch):
    rng = np.random.default_rng()
    x, y, a = inputs(rng)
    got = launch(KERNELS[source](), x, y, a)
    np.testing.assert_allclose(got, a * x + y, rtol=1e-5, atol=1e-6)  # FMA


def cupy_raw_kernel():
    cupy = pytest.importorskip("cupy")
    return cupy.RawKernel(SRC, "axpy")


def cupy_module_function():
    cupy = pytest.importorskip("cupy")
    return cupy.RawModule(code=SRC).get_function("axpy")  # a RawKernel


def cuda_core_kernel():
    from cuda.core import Device

    Device().set_current()  # cuda.core loads in the current device's primary context
    return object_code().get_kernel("axpy")


LIVE = {
    "CuPy RawKernel": lambda: ncl.foreign_kernel(cupy_raw_kernel(), signature=SIG),
    "CuPy RawModule.get_function": lambda: ncl.foreign_kernel(cupy_module_function(),
                                                              signature=SIG),
    "CuPy Function": lambda: ncl.foreign_kernel(cupy_raw_kernel().kernel, "axpy", SIG),
    "cuda.core Kernel": lambda: ncl.foreign_kernel(cuda_core_kernel(), "axpy", SIG),
}


@pytest.mark.parametrize("source", sorted(LIVE))
@pytest.mark.parametrize("launch", [launch_njit, launch_cfunc, launch_as_argument])
def test_live_kernel_end_to_end(source, launch):
    k = LIVE[source]()
    assert k.image is None and k.handle != 0
    x, y, a = inputs(np.random.default_rng())
    np.testing.assert_allclose(launch(k, x, y, a), a * x + y, rtol=1e-5, atol=1e-6)  # FMA


def test_cupy_raw_kernel_launches_cupys_own_binary():
    raw = cupy_raw_kernel()
    k = ncl.foreign_kernel(raw, signature=SIG)
    assert (k.handle, k.handle_kind) == (raw.kernel.ptr, "CUfunction")
    assert ncl.kernel_handle(k, SIG).handle == raw.kernel.ptr


def test_cuda_core_kernel_launches_its_own_cukernel():
    kern = cuda_core_kernel()
    k = ncl.foreign_kernel(kern, "axpy", SIG)
    assert (k.handle, k.handle_kind) == (int(kern.handle), "CUkernel")


@pytest.mark.parametrize("source", sorted(LIVE))
def test_live_kernel_signature_is_checked_by_the_driver(source):
    make = {"CuPy RawKernel": lambda: cupy_raw_kernel(),
            "CuPy RawModule.get_function": cupy_module_function,
            "CuPy Function": lambda: cupy_raw_kernel().kernel,
            "cuda.core Kernel": cuda_core_kernel}[source]
    wrong = "void(CPointer(float32), CPointer(float32), float64, int64)"
    with pytest.raises(ValueError) as err:
        ncl.foreign_kernel(make(), "axpy", wrong, param_names=("y", "x", "a", "n"))
    assert "'a'" in str(err.value) and "8 bytes" in str(err.value) \
        and "takes 4 bytes" in str(err.value)


def test_cupy_own_launch_and_njit_launch_agree():
    cupy = pytest.importorskip("cupy")
    raw = cupy.RawKernel(SRC, "axpy")
    x, y, a = inputs(np.random.default_rng())
    cy = cupy.asarray(y)
    raw(((N + 127) // 128,), (128,), (cy, cupy.asarray(x), cupy.float32(a), cupy.int64(N)))
    cupy.cuda.Device().synchronize()
    ours = launch_njit(ncl.foreign_kernel(raw, signature=SIG), x, y, a)
    np.testing.assert_array_equal(ours, cupy.asnumpy(cy))


def test_occupancy_of_a_live_kernel_is_the_drivers():
    kern = cuda_core_kernel()
    k = ncl.foreign_kernel(kern, "axpy", SIG)
    raw = cupy_raw_kernel()
    kc = ncl.foreign_kernel(raw, signature=SIG)

    @njit
    def blocks(p):
        return k[1, 256, 0, 1024].max_active_blocks(p, p, 1.0, 8)

    @njit
    def blocks_cupy(p):
        return kc[1, 256, 0, 1024].max_active_blocks(p, p, 1.0, 8)

    from cuda.bindings import driver as cu

    assert blocks(0) == kern.occupancy.max_active_blocks_per_multiprocessor(256, 1024) > 0
    # CuPy compiles with its own options: ask the driver about its CUfunction.
    status, want = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(
        cu.CUfunction(raw.kernel.ptr), 256, 1024)
    assert status == cu.CUresult.CUDA_SUCCESS and blocks_cupy(0) == want > 0


@pytest.mark.parametrize("source", ["CuPy RawKernel", "cuda.core Kernel"])
def test_graph_replay_and_update_of_a_live_kernel(source):
    k = LIVE[source]()
    x, y, a = inputs(np.random.default_rng())
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    stream = cuda.stream()

    @njit
    def record_and_replay(yv, xv, a, n, s, times):
        graphs.begin_capture(s)
        k[(n + 127) // 128, 128, s](yv, xv, a, n)
        node = graphs.last_launch(s)
        exe = graphs.end_capture(s).instantiate()
        for _ in range(times):
            exe.launch(s)
        exe.update_launch(node, k[(n + 127) // 128, 128, s], yv, xv, 2 * a, n)
        exe.launch(s)

    record_and_replay(dy, dx, a, N, int(stream.handle), 2)
    stream.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), 4 * a * x + y, rtol=1e-5, atol=1e-5)


def test_cluster_launch_of_a_cuda_core_kernel():
    k = LIVE["cuda.core Kernel"]()
    x, y, a = inputs(np.random.default_rng())
    dx, dy = cuda.to_device(x), cuda.to_device(y)

    @njit
    def go(yv, xv, a, n):
        k[8, 128, 0, 0, 2](yv, xv, a, n)

    go(dy, dx, a, N)
    cuda.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), a * x + y, rtol=1e-5, atol=1e-6)


def test_triton_kernel_end_to_end():
    torch = pytest.importorskip("torch")
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def add(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = i < n
        tl.store(out_ptr + i, tl.load(x_ptr + i, mask=m) + tl.load(y_ptr + i, mask=m), mask=m)

    rng = np.random.default_rng()
    x, y, _ = inputs(rng)
    tx, ty = torch.tensor(x, device="cuda"), torch.tensor(y, device="cuda")
    tout = torch.full((N,), float("nan"), device="cuda")
    compiled = add[(triton.cdiv(N, 256),)](tx, ty, tout, N, BLOCK=256)
    torch.cuda.synchronize()
    k = ncl.foreign_kernel(compiled)
    dout = cuda.to_device(np.full(N, np.nan, np.float32))
    block, sharedmem = k.block[0], k.sharedmem  # num_warps * 32 threads, its shared memory

    @njit
    def go(xp, yp, out, n):
        k[(n + 255) // 256, block, 0, sharedmem](xp, yp, out, n)

    go(tx.data_ptr(), ty.data_ptr(), dout, N)
    cuda.synchronize()
    np.testing.assert_array_equal(dout.copy_to_host(), tout.cpu().numpy())
    np.testing.assert_allclose(dout.copy_to_host(), x + y, rtol=1e-6)


def test_graph_replay_of_a_foreign_kernel():
    k = KERNELS["cubin bytes"]()
    x, y, a = inputs(np.random.default_rng())
    dx, dy = cuda.to_device(x), cuda.to_device(y)
    stream = cuda.stream()

    @njit
    def record_and_replay(yv, xv, a, n, s, times):
        graphs.begin_capture(s)
        k[(n + 127) // 128, 128, s](yv, xv, a, n)
        exe = graphs.end_capture(s).instantiate()
        for _ in range(times):
            exe.launch(s)

    record_and_replay(dy, dx, a, N, int(stream.handle), 3)
    stream.synchronize()
    np.testing.assert_allclose(dy.copy_to_host(), 3 * a * x + y, rtol=1e-5, atol=1e-6)  # FMA
