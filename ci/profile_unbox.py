"""Diagnostics (GPU): where a call of an @njit launcher with device arrays spends its time."""
import ctypes, os, time, cProfile, pstats, io
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
import numpy as np
from numba import cuda, njit
import numba_cuda_launch as ncl
from numba.core.typing.typeof import typeof

def t(fn, n=20000):
    fn()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6

@cuda.jit
def add3(a, b, c):
    i = cuda.grid(1)
    if i < c.size:
        c[i] = a[i] + b[i]

@njit
def launcher(a, b, c, stream):
    add3[(c.size + 255) // 256, 256, stream](a, b, c)

@njit
def take1(a):
    return a.size

h = np.ones(1024, np.float32)
d = cuda.to_device(h)
s = cuda.stream()
print("numba-cuda CAI %.2f" % t(lambda: d.__cuda_array_interface__))
print("numba-cuda device_ctypes_pointer %.2f" % t(lambda: d.device_ctypes_pointer.value))
print("numba-cuda _numba_type_ %.2f" % t(lambda: d._numba_type_))
print("numba-cuda shape+strides %.2f" % t(lambda: (d.shape, d.strides, d.stream)))
print("int(stream) %.2f" % t(lambda: int(s)))
print("typeof numba-cuda stream %.2f" % t(lambda: typeof(s)))
print("typeof numba-cuda array %.2f" % t(lambda: typeof(d)))
print("take1 numba-cuda %.2f" % t(lambda: take1(d)))
from numba_cuda_launch.interop import arrays
print("numba-cuda reader %.2f" % t(lambda: arrays._READERS[type(d)](d, 1)))
@njit
def take_stream(s):
    return 0
print("take_stream numba-cuda %.2f" % t(lambda: take_stream(s)))
print("launcher numba-cuda %.2f" % t(lambda: launcher(d, d, d, s)))
print("numba-cuda launch %.2f" % t(lambda: add3[4, 256, s](d, d, d)))
libcuda = ctypes.CDLL("libcuda.so.1")
ss = libcuda.cuStreamSynchronize
ss.argtypes = [ctypes.c_void_p]
print("cuStreamSynchronize(legacy) ctypes %.2f" % t(lambda: ss(1)))
print("cuStreamSynchronize(stream) ctypes %.2f" % t(lambda: ss(int(s))))
sq = libcuda.cuStreamQuery
sq.argtypes = [ctypes.c_void_p]
print("cuStreamQuery(legacy) ctypes %.2f" % t(lambda: sq(1)))
print("cuStreamQuery(stream) ctypes %.2f" % t(lambda: sq(int(s))))
print("ncl.stream_synchronize_status(1) %.2f" % t(lambda: ncl.stream_synchronize_status(1)))
print("ctypes cuCtxGetCurrent-like noop %.2f" % t(lambda: libcuda.cuDriverGetVersion(ctypes.byref(ctypes.c_int()))))
try:
    import cupy as cp
    c = cp.asarray(h)
    cs = cp.cuda.Stream(non_blocking=True)
    print("cupy CAI", c.__cuda_array_interface__)
    print("cupy CAI %.2f" % t(lambda: c.__cuda_array_interface__))
    print("cupy data.ptr %.2f" % t(lambda: c.data.ptr))
    print("cupy shape strides dtype %.2f" % t(lambda: (c.shape, c.strides, c.dtype)))
    print("cupy flags %.2f" % t(lambda: (c.flags.c_contiguous, c.flags.f_contiguous)))
    print("cupy current stream ptr %.2f" % t(lambda: cp.cuda.get_current_stream().ptr))
    print("typeof cupy %.2f" % t(lambda: typeof(c)))
    print("typeof cupy stream %.2f" % t(lambda: typeof(cs)))
    print("take1 cupy %.2f" % t(lambda: take1(c)))
    print("take1.typeof_pyval cupy %.2f" % t(lambda: take1.typeof_pyval(c)))
    print("launcher cupy %.2f" % t(lambda: launcher(c, c, c, cs)))
    from numba_cuda_launch.interop import arrays
    print("cupy reader %.2f" % t(lambda: arrays._READERS[type(c)](c, 1)))
    from cupy import _util
    _util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 2
    print("take1 cupy, CAI v2 (no stream) %.2f" % t(lambda: take1(c)))
    print("launcher cupy, CAI v2 (no stream) %.2f" % t(lambda: launcher(c, c, c, cs)))
    _util.CUDA_ARRAY_INTERFACE_EXPORT_VERSION = 3
    pr = cProfile.Profile()
    pr.enable()
    for _ in range(5000):
        launcher(c, c, c, cs)
    pr.disable()
    out = io.StringIO()
    pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(18)
    print(out.getvalue())
except ImportError as e:
    print("no cupy", e)
try:
    import torch
    tt = torch.ones(1024, device="cuda")
    print("torch CAI %.2f" % t(lambda: tt.__cuda_array_interface__))
    print("torch data_ptr/shape/stride %.2f" % t(lambda: (tt.data_ptr(), tt.shape, tt.stride(), tt.dtype)))
    print("torch typeof %.2f" % t(lambda: typeof(tt)))
    print("take1 torch %.2f" % t(lambda: take1(tt)))
except ImportError as e:
    print("no torch", e)
try:
    import jax.numpy as jnp
    j = jnp.ones(1024)
    print("jax CAI %.2f" % t(lambda: j.__cuda_array_interface__))
    print("jax CAI", j.__cuda_array_interface__)
    print("take1 jax %.2f" % t(lambda: take1(j)))
except ImportError as e:
    print("no jax", e)
pr = cProfile.Profile()
pr.enable()
for _ in range(5000):
    launcher(d, d, d, s)
pr.disable()
out = io.StringIO()
pstats.Stats(pr, stream=out).sort_stats("tottime").print_stats(20)
print(out.getvalue())
