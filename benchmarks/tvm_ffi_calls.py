"""Cost of one call of a 3-tensor kernel from Python with PyTorch tensors (GPU;
docs/tvm-ffi.md, "Speed"): a ``tvm_ffi_kernel`` function against a TVM-FFI
function written in CUDA C++ doing the same checks and launch
(``tvm_ffi.cpp.load_inline``, nvcc; again with its kernel's parameters laid out
as Numba's, 22 of them), beside ``torch.library.custom_op`` around
numba-cuda's own launch, and inside ``jax.jit``: ``jax_kernel`` against the same
TVM-FFI function registered through jax-tvm-ffi. Each row: the median over
batches, interleaved, of microseconds per call of back-to-back calls on one
stream (synchronised at the end of each batch). Target: the ``tvm_ffi_kernel``
row at most 1.1x the CUDA C++ row."""

import argparse
import json
import os
import statistics
import time

import numba
import numpy as np
from numba import cuda

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

# The C++ functions' headers and checks (benchmarks/tvm_ffi_calls_cpu.py's
# too): what a tvm_ffi_kernel function checks, less alignment and one device.
CXX_CHECKS = r"""
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>

static inline int64_t checked_size(tvm::ffi::TensorView x, tvm::ffi::TensorView y,
                                   tvm::ffi::TensorView out) {
  DLDataType f32{kDLFloat, 32, 1};
  TVM_FFI_ICHECK(x.ndim() == 1 && y.ndim() == 1 && out.ndim() == 1) << "rank";
  TVM_FFI_ICHECK(x.dtype() == f32 && y.dtype() == f32 && out.dtype() == f32) << "dtype";
  TVM_FFI_ICHECK(x.device().device_type == kDLCUDA && y.device().device_type == kDLCUDA &&
                 out.device().device_type == kDLCUDA) << "device";
  TVM_FFI_ICHECK(x.IsContiguous() && y.IsContiguous() && out.IsContiguous()) << "contiguous";
  return x.size(0);
}
"""

CUDA_SOURCE = CXX_CHECKS + r"""
__global__ void axpy_kernel(const float* x, const float* y, float* out, float a, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a * x[i] + y[i];
}

void axpy(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView out, double a) {
  int64_t n = checked_size(x, y, out);
  cudaStream_t stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  axpy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(
      static_cast<const float*>(x.data_ptr()), static_cast<const float*>(y.data_ptr()),
      static_cast<float*>(out.data_ptr()), static_cast<float>(a), n);
}
"""


# The same function launching a kernel whose parameters are laid out as
# Numba's (each 1-d array: meminfo, parent, nitems, itemsize, data, shape,
# stride; 22 in all, what a tvm_ffi_kernel function passes): how much of a
# difference is the driver's per-parameter work rather than the body's.
# Built apart, so that the rows above stand if it does not build.
CUDA_SOURCE_NUMBA_LAYOUT = CXX_CHECKS + r"""
#define ARRAY(p) void* p##_meminfo, void* p##_parent, int64_t p##_nitems, int64_t p##_itemsize, \
                 float* p, int64_t p##_shape, int64_t p##_stride
#define PASS(t) nullptr, nullptr, t.size(0), (int64_t)4, static_cast<float*>(t.data_ptr()), \
                t.size(0), (int64_t)4

__global__ void axpy_kernel(ARRAY(x), ARRAY(y), ARRAY(out), float a) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < x_nitems) out[i] = a * x[i] + y[i];
}

void axpy(tvm::ffi::TensorView x, tvm::ffi::TensorView y, tvm::ffi::TensorView out, double a) {
  int64_t n = checked_size(x, y, out);
  cudaStream_t stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  axpy_kernel<<<(n + 255) / 256, 256, 0, stream>>>(PASS(x), PASS(y), PASS(out),
                                                   static_cast<float>(a));
}
"""


@cuda.jit
def axpy(x, y, out, a):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = a * x[i] + y[i]


@numba.njit
def by_size(xs, ys, outs, a):
    return (xs[0] + 255) // 256, 256


def per_call(fn, calls, sync):
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - t0) / calls * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1 << 16)
    p.add_argument("--calls", type=int, default=2000)
    p.add_argument("--batches", type=int, default=15)
    p.add_argument("--json")
    p.add_argument("--markdown")
    args = p.parse_args()

    import torch
    import tvm_ffi
    import tvm_ffi.cpp

    from numba_cuda_launch import tvm_ffi as ntf

    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.standard_normal(args.n).astype(np.float32)).cuda()
    y = torch.from_numpy(rng.standard_normal(args.n).astype(np.float32)).cuda()
    out = torch.empty_like(x)
    expected = 2.0 * x + y

    ours = ntf.tvm_ffi_kernel(axpy, by_size, arrays=[(np.float32, 1)] * 3,
                              scalars={"a": np.float32}).function
    cxx = tvm_ffi.cpp.load_inline("ncl_bench_axpy", cuda_sources=CUDA_SOURCE,
                                  functions=["axpy"]).axpy

    @torch.library.custom_op("ncl_bench::axpy", mutates_args=("out",))
    def numba_op(x: torch.Tensor, y: torch.Tensor, out: torch.Tensor, a: float) -> None:
        stream = cuda.external_stream(torch.cuda.current_stream().cuda_stream)
        axpy[(x.numel() + 255) // 256, 256, stream](x, y, out, a)

    rows = {
        "tvm_ffi_kernel function (numba-cuda-launch)": lambda: ours(x, y, out, 2.0),
        "TVM-FFI function in CUDA C++ (load_inline)": lambda: cxx(x, y, out, 2.0),
        "torch.library.custom_op around numba-cuda's launch": lambda: numba_op(x, y, out, 2.0),
    }
    try:
        cxx22 = tvm_ffi.cpp.load_inline("ncl_bench_axpy_numba_layout",
                                        cuda_sources=CUDA_SOURCE_NUMBA_LAYOUT,
                                        functions=["axpy"]).axpy
        rows["the CUDA C++ function, kernel in Numba's parameter layout (22)"] = \
            lambda: cxx22(x, y, out, 2.0)
    except Exception as exc:  # a diagnostic row: the others stand without it
        print("the row in Numba's parameter layout is skipped: %s" % exc)
    for name, fn in rows.items():  # warm up, and check each computes the kernel
        out.fill_(float("nan"))
        fn()
        torch.cuda.synchronize()
        torch.testing.assert_close(out, expected)

    sync = torch.cuda.synchronize
    jax_rows = {}
    try:
        import jax
        import jax_tvm_ffi  # noqa: F401

        from numba_cuda_launch.jax import jax_kernel

        jx = jax.device_put(x.cpu().numpy())
        jy = jax.device_put(y.cpu().numpy())
        spec = jax.ShapeDtypeStruct(jx.shape, jx.dtype)
        jk = jax_kernel(axpy, lambda x, y, a: spec, ((args.n + 255) // 256, 256),
                        scalars={"a": np.float32})
        jf = ntf.jax_function(ntf.tvm_ffi_kernel(axpy, by_size, arrays=[(np.float32, 1)] * 3,
                                                 scalars={"a": np.float32}),
                              lambda x, y, a: spec)
        a2 = np.float32(2.0)
        f_jk = jax.jit(lambda x, y: jk(x, y, a=a2))
        f_tv = jax.jit(lambda x, y: jf(x, y, a=a2))
        for f in (f_jk, f_tv):
            np.testing.assert_allclose(np.asarray(f(jx, jy)), expected.cpu().numpy(),
                                       rtol=1e-6)
        jax_rows = {"jax.jit(jax_kernel)": (lambda: f_jk(jx, jy)),
                    "jax.jit(tvm_ffi_kernel through jax-tvm-ffi)": (lambda: f_tv(jx, jy))}
    except ImportError as exc:
        print("JAX rows skipped:", exc)

    samples = {name: [] for name in list(rows) + list(jax_rows)}
    for _ in range(args.batches):
        for name, fn in rows.items():
            samples[name].append(per_call(fn, args.calls, sync))
        for name, fn in jax_rows.items():
            box = []

            def call(fn=fn):
                box.append(fn())

            def jsync():
                if box:
                    box[-1].block_until_ready()
                box.clear()
            samples[name].append(per_call(call, args.calls, jsync))
    medians = {name: statistics.median(v) for name, v in samples.items()}
    base = medians["TVM-FFI function in CUDA C++ (load_inline)"]
    lines = ["| path | us/call | vs CUDA C++ |", "|---|---:|---:|"]
    for name, us in medians.items():
        lines.append("| %s | %.2f | %.2fx |" % (name, us, us / base))
    text = "\n".join(lines)
    print(text)
    ratio = medians["tvm_ffi_kernel function (numba-cuda-launch)"] / base
    print("tvm_ffi_kernel / CUDA C++: %.3f (target <= 1.1): %s"
          % (ratio, "met" if ratio <= 1.1 else "NOT met"))
    result = {"n": args.n, "calls": args.calls, "batches": args.batches,
              "us_per_call": medians, "samples": samples, "ratio": ratio,
              "torch": torch.__version__, "tvm_ffi": tvm_ffi.__version__}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
