"""The request that started the project: a @cfunc that launches a @cuda.jit
kernel, callable from C (here through ctypes, as XLA's legacy custom calls
and other C callers would call it).

With a GPU: launches on a stream with device buffers and checks the result.
Without one (no CUDA driver): runs the same cfunc under numba-cuda's CUDA
simulator on host memory, and checks the result the same way. With
``--record`` and no GPU: compiles the real kernel image for compute
capability 9.0 and prints the driver launch the cfunc makes, recorded by
numba_cuda_launch's recording driver.
"""

import ctypes
import os
import sys


def _have_cuda_driver():
    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


RECORD = "--record" in sys.argv
if not _have_cuda_driver() and not RECORD:
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numba
import numba.types as nt
import numpy as np
from numba import cuda

import numba_cuda_launch  # noqa: F401  (enables kernel[...] in CPU code)

SIMULATED = bool(cuda.config.ENABLE_CUDASIM) if hasattr(cuda, "config") else False
HAVE_GPU = cuda.is_available() and not SIMULATED
if not HAVE_GPU and not SIMULATED:
    numba_cuda_launch.set_compute_capability((9, 0))


@cuda.jit(nt.void(nt.CPointer(nt.float32), nt.CPointer(nt.float32)))
def kernel_gpu(input, output):
    i = cuda.grid(1)
    output[i] = input[i] + 1


@numba.njit
def some_calculation(opaque, opaque_len):
    # opaque holds the element count as a little-endian integer.
    n = 0
    for k in range(opaque_len):
        n |= (opaque[k] & 0xFF) << (8 * k)
    threadsperblock = 128
    return (n + threadsperblock - 1) // threadsperblock, threadsperblock


@numba.cfunc(nt.void(nt.voidptr, nt.CPointer(nt.voidptr), nt.CPointer(nt.char), nt.ulong))
def kernel_launcher(stream, buffers, opaque, opaque_len):
    blockspergrid, threadsperblock = some_calculation(opaque, opaque_len)
    kernel_gpu[blockspergrid, threadsperblock, stream](buffers[0], buffers[1])


# The C signature a caller sees: void(void*, void**, const char*, size_t).
launch = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p,
                          ctypes.c_ulong)(kernel_launcher.address)


def main():
    n = 128 * 1000
    opaque = n.to_bytes(8, "little")
    print("compiled cfunc kernel_launcher at 0x%x" % kernel_launcher.address)
    if SIMULATED:
        n = 128 * 4  # the simulator runs every thread in Python: keep it small
        opaque = n.to_bytes(8, "little")
        x = np.random.default_rng().standard_normal(n).astype(np.float32)
        out = np.full(n, np.nan, np.float32)
        buffers = (ctypes.c_void_p * 2)(x.ctypes.data, out.ctypes.data)
        launch(0, ctypes.addressof(buffers), opaque, len(opaque))
        ok = np.array_equal(out, x + 1)
        print("no GPU here: ran kernel_gpu under numba-cuda's CUDA simulator "
              "(NUMBA_ENABLE_CUDASIM=1) on host memory: output %s" % ("correct" if ok else "WRONG"))
        raise SystemExit(0 if ok else 1)
    if HAVE_GPU:
        x = np.random.default_rng().standard_normal(n).astype(np.float32)
        d_in = cuda.to_device(x)
        d_out = cuda.to_device(np.full(n, np.nan, np.float32))
        stream = cuda.stream()
        ptr = lambda a: a.__cuda_array_interface__["data"][0]  # noqa: E731
        buffers = (ctypes.c_void_p * 2)(ptr(d_in), ptr(d_out))
        launch(int(stream.handle), ctypes.addressof(buffers), opaque, len(opaque))
        stream.synchronize()
        ok = np.array_equal(d_out.copy_to_host(), x + 1)
        print("launched kernel_gpu on %s: output %s" % (
            cuda.get_current_device().name.decode() if isinstance(
                cuda.get_current_device().name, bytes) else cuda.get_current_device().name,
            "correct" if ok else "WRONG"))
        raise SystemExit(0 if ok else 1)

    from numba_cuda_launch.testing import RecordingDriver

    handle = numba_cuda_launch.kernel_handle(kernel_gpu, (nt.CPointer(nt.float32),) * 2)
    print("no GPU here: kernel image built for sm_90 (%d bytes), entry %s..."
          % (len(handle.image), handle.entry_name[:40]))
    buffers = (ctypes.c_void_p * 2)(0x7F0000000000, 0x7F0000100000)
    with RecordingDriver() as rec:
        rec.register(handle)
        launch(0x1234, ctypes.addressof(buffers), opaque, len(opaque))
    (done,) = rec.launches
    params = ["0x%x" % int.from_bytes(p, "little") for p in done.params]
    print("the cfunc would launch: cuLaunchKernel(kernel_gpu, grid=%s, block=%s, "
          "sharedMem=%d, stream=0x%x, params=%s)"
          % (done.grid, done.block, done.sharedmem, done.stream, params))


if __name__ == "__main__":
    main()
