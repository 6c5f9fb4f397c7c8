"""Build libsaxpy.so and saxpy.h from a @cfunc launcher: a C library that
launches a Numba CUDA kernel with no Python at run time (README, "Without
Python: a C library"; docs/aot.md).

    python examples/clib/build.py [build/]        # writes build/libsaxpy.so, build/saxpy.h
    cc -O2 -I build examples/clib/main.c -L build -lsaxpy -Wl,-rpath,build -ldl -lm -o build/saxpy
    build/saxpy                                     # on a machine with a GPU

With no GPU here the kernel image is built for sm_90 (NUMBA_CUDA_LAUNCH_CC
picks another architecture).
"""

import os
import sys

import numba
import numba.types as nt
from numba import cuda

import numba_cuda_launch
from numba_cuda_launch import aot

if not cuda.is_available() and numba_cuda_launch.get_compute_capability() is None:
    numba_cuda_launch.set_compute_capability((9, 0))  # before the eager kernel compiles

f32p = nt.CPointer(nt.float32)


@cuda.jit(nt.void(f32p, f32p, nt.float32, nt.int64))
def saxpy(x, y, a, n):
    i = cuda.grid(1)
    if i < n:
        y[i] = a * x[i] + y[i]


@numba.cfunc(nt.int32(nt.voidptr, f32p, f32p, nt.float32, nt.int64))
def saxpy_launch(stream, x, y, a, n):
    return saxpy[(n + 255) // 256, 256, stream].launch_status(x, y, a, n)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "build"
    os.makedirs(out, exist_ok=True)
    lib = aot.build(os.path.join(out, "libsaxpy.so"), {"saxpy_launch": saxpy_launch},
                    header=os.path.join(out, "saxpy.h"))
    print("built %s (%d bytes) and %s\n  %s" % (lib.path, os.path.getsize(lib.path),
                                               lib.header, lib.build_info))
