"""Launch cost of kernels from other compilers (docs/kernel-sources.md).

Per source (a cubin built with NVRTC, a cuda.core ObjectCode and the
Kernel it loads, a CuPy RawKernel -- CuPy's own loaded CUfunction --, a
Triton CompiledKernel, a numba-cuda-mlir kernel, whichever are installed) the same
kernel launched from an ``@njit`` loop and from a C ``cuLaunchKernel`` loop
(benchmarks/launch_c.c); and a CuPy RawKernel launched from an ``@njit``
loop against CuPy's own Python launch. All in this process, with
benchmarks/launch_overhead.py's timing (median host microseconds per
launch).

    python benchmarks/kernel_sources.py [--json out.json]
"""

import argparse
import ctypes
import json
import os
import sys
import tempfile

import numba
import numpy as np
from numba import cuda, njit
from numba.core import types as nt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numba_cuda_launch as ncl  # noqa: E402
from launch_overhead import build_c_baseline, median_us  # noqa: E402

SRC = ('extern "C" __global__ void k(float* x, const float* y, long long n)'
       '{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;'
       ' if (i < n) x[i] = y[i] + 1; }')
SIG = "void(CPointer(float32), CPointer(float32), int64)"
N = 512


def sources():
    """(name, foreign kernel, Python launch or None) for each installed source."""
    from cuda.core import Program, ProgramOptions

    cc = cuda.get_current_device().compute_capability
    code = Program(SRC, "c++", ProgramOptions(arch="sm_%d%d" % cc)).compile("cubin")
    out = [("cubin (bytes)", ncl.foreign_kernel(code.code, "k", SIG), None),
           ("cuda.core ObjectCode", ncl.foreign_kernel(code, "k", SIG), None),
           ("cuda.core Kernel", ncl.foreign_kernel(code.get_kernel("k"), "k", SIG), None)]
    try:
        import cupy
    except Exception:
        cupy = None
    if cupy is not None:
        rk = cupy.RawKernel(SRC, "k")
        out.append(("CuPy RawKernel", ncl.foreign_kernel(rk, signature=SIG), rk))
    try:  # Triton launches take torch tensors
        import torch
        import triton
        import triton.language as tl
    except Exception:
        triton = None
    if triton is not None:
        @triton.jit
        def tk(x, y, n, BLOCK: tl.constexpr):
            i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(x + i, tl.load(y + i, mask=i < n) + 1, mask=i < n)

        a = torch.zeros(N, device="cuda")
        compiled = tk[(1,)](a, a, N, BLOCK=N)
        out.append(("Triton CompiledKernel", ncl.foreign_kernel(compiled), None))
    return out


def mlir_kernel():
    """The same kernel from numba-cuda-mlir (carray views of the memory), or
    None where it is not installed."""
    try:
        from numba_cuda_mlir import cuda as mcuda
    except Exception:
        return None

    @mcuda.jit
    def k(x, y, n):
        i = mcuda.grid(1)
        if i < n:
            x[i] = y[i] + 1
    return k


def njit_loop(kernel, block):
    @njit
    def loop(x, stream, n):
        for _ in range(n):
            kernel[2, block, stream](x, x, 512)
    return loop


def mlir_loop(kernel):
    @njit
    def loop(p, stream, n):
        x = numba.carray(ncl.as_voidptr(p), (N,), np.float32)
        for _ in range(n):
            kernel[2, 256, stream](x, x, N)
    return loop


def run(args):
    libcuda = ctypes.CDLL("libcuda.so.1")
    c_launch = ctypes.cast(libcuda.cuLaunchKernel, ctypes.c_void_p).value
    clib = build_c_baseline(tempfile.mkdtemp())
    stream = cuda.stream()
    raw = int(stream.handle)
    dev = cuda.device_array(4 * N, np.float32)
    dptr = dev.__cuda_array_interface__["data"][0]
    rows = []
    entries = [(name, kernel, rk, False) for name, kernel, rk in sources()]
    mk = mlir_kernel()
    if mk is not None:
        entries.append(("numba-cuda-mlir @cuda.jit", mk, None, True))
    for name, kernel, rk, is_mlir in entries:
        row = {"source": name}
        if is_mlir:
            block, loop = 256, mlir_loop(kernel)
            view = nt.float32[::1]
            h = ncl.kernel_handle(kernel, (view, view, nt.int64))
            # a 1-D memref: allocated and aligned pointer, offset, shape, stride
            memref = [dptr, dptr, 0, N, 1]
            values = memref + memref + [N]
        else:
            block = kernel.block[0] if kernel.block else 256
            loop = njit_loop(kernel, block)
            h = ncl.kernel_handle(kernel, kernel.signature)
            values = [dptr, dptr, N] + [0] * (len(h.params) - 3)
        row["@njit loop"] = median_us(lambda n: loop(dptr, raw, n), stream.synchronize)
        slots = [ctypes.c_uint64(v) for v in values]
        params = (ctypes.c_void_p * len(slots))(*[ctypes.addressof(s) for s in slots])
        kh = h.handle
        if clib is not None:
            status = ctypes.c_int()

            def c_batch(n):
                clib.bench_launch(c_launch, kh, raw, params, 2, block, n, ctypes.byref(status))
                assert status.value == 0
            row["C cuLaunchKernel loop"] = median_us(c_batch, stream.synchronize)
            row["ratio @njit / C"] = row["@njit loop"] / row["C cuLaunchKernel loop"]
        if rk is not None:
            import cupy

            cx = cupy.zeros(N, cupy.float32)
            cs = cupy.cuda.ExternalStream(raw)

            def cupy_batch(n):
                with cs:
                    for _ in range(n):
                        rk((2,), (256,), (cx, cx, cupy.int64(N)))
            row["CuPy Python loop"] = median_us(cupy_batch, stream.synchronize)
            row["ratio CuPy / @njit"] = row["CuPy Python loop"] / row["@njit loop"]
        rows.append(row)
    for row in rows:
        print("  ".join("%s: %.3g" % (k, v) if isinstance(v, float) else str(v)
                        for k, v in row.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"benchmark": "kernel_sources", "unit": "us per launch",
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write the rows to this file")
    run(parser.parse_args())
