"""jax_kernel over every kernel source without a GPU: numba-cuda-mlir kernels
and foreign kernels (a PTX image built here with NVRTC), their handlers
called with call frames built in memory and their launches recorded by the
recording driver; the parameter bytes are compared with what each source's
layout implies (computed here with ``struct``), and the trace-time errors."""

import ctypes
import struct

import numpy as np
import pytest

jax = pytest.importorskip("jax")

import numba_cuda_launch as ncl  # noqa: E402
from support.nvrtc import nvrtc_ptx  # noqa: E402
from numba_cuda_launch.jax import jax_kernel  # noqa: E402
from numba_cuda_launch.testing import RecordingDriver  # noqa: E402
from support.ffi_frames import FakeXla, Frame  # noqa: E402

rng = np.random.default_rng()

SCALE = r'''
extern "C" __global__ void scale(const float* x, float* out, float a, long long n)
{ long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; if (i < n) out[i] = a * x[i]; }
'''
SCALE_SIG = "void(CPointer(float32), CPointer(float32), float32, int64)"


@pytest.fixture(scope="module")
def foreign_scale():
    ptx = nvrtc_ptx(SCALE, ("-arch=compute_90",), "scale")
    return ncl.foreign_kernel(ptx, "scale", SCALE_SIG, param_names=["x", "out", "a", "n"])


def call(handler, frame):
    fn = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)(handler.address)
    return fn(frame.address)


def spec(n, dtype=np.float32):
    return jax.ShapeDtypeStruct((n,), dtype)


def launch_attrs(grid, block, sharedmem=0, **scalars):
    attrs = {"ncl_grid_x": np.int64(grid), "ncl_block_x": np.int64(block),
             "ncl_sharedmem": np.int64(sharedmem)}
    attrs.update({"ncl_s_" + k: v for k, v in scalars.items()})
    return attrs


# -- foreign kernels -------------------------------------------------------------

def test_foreign_kernel_handler_passes_buffer_pointers_and_named_scalars(foreign_scale):
    k = jax_kernel(foreign_scale, lambda x, a, n: x, lambda x, a, n: (8, 128),
                   scalars={"n": np.int64, "a": np.float32})
    handler = k.handler([spec(1000)], [spec(1000)])
    a, n = np.float32(rng.standard_normal()), int(rng.integers(1, 1000))
    xla = FakeXla(stream=0x5150)
    frame = Frame(xla, args=[(0x1000, (1000,), np.float32)],
                  rets=[(0x3000, (1000,), np.float32)],
                  attrs=launch_attrs(8, 128, 256, a=a, n=np.int64(n)))
    with RecordingDriver() as rec:
        assert call(handler, frame) is None
    (launch,) = rec.launches
    assert xla.errors == []
    assert (launch.kernel, launch.grid, launch.block, launch.sharedmem, launch.stream) == \
        ("scale", (8, 1, 1), (128, 1, 1), 256, 0x5150)
    # the C signature: x, out as the buffers' data pointers, then a and n
    assert launch.params == [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x3000),
                             struct.pack("<f", a), struct.pack("<q", n)]


def test_foreign_kernel_parameters_are_named_arg_n_without_param_names():
    ptx = nvrtc_ptx(SCALE, ("-arch=compute_90",), "scale")
    k = ncl.foreign_kernel(ptx, "scale", SCALE_SIG)
    with pytest.raises(TypeError, match=r"kernel 'scale': scalars must be named as the "
                                        r"kernel's last 2 parameter\(s\) \['arg2', 'arg3'\]"):
        jax_kernel(k, lambda x, a, n: x, (1, 32), scalars={"a": np.float32, "n": np.int64})
    ok = jax_kernel(k, lambda x, arg2, arg3: x, (1, 32),
                    scalars={"arg2": np.float32, "arg3": np.int64})
    assert ok.register(spec(4), arg2=1.0, arg3=4).startswith("ncl.foreign.scale.float32r1.")


def test_foreign_kernel_dtype_mismatch_names_the_parameter(foreign_scale):
    k = jax_kernel(foreign_scale, lambda x, a, n: x, (1, 32),
                   scalars={"a": np.float32, "n": np.int64})
    with pytest.raises(TypeError) as info:
        k.register(spec(4, np.float64), a=1.0, n=4)
    text = str(info.value)
    assert "kernel 'scale' parameter 'x'" in text and "float32" in text
    assert "the kernel is called with the inputs, then the outputs, then the scalars" in text


def test_foreign_kernel_initialize_stage_preloads(foreign_scale):
    k = jax_kernel(foreign_scale, lambda x, a, n: x, (1, 32),
                   scalars={"a": np.float32, "n": np.int64})
    handler = k.handler([spec(10)], [spec(10)])
    import numba_cuda_launch.xla_ffi as xla_ffi

    frame = Frame(FakeXla(), args=[(0x1000, (10,), np.float32)],
                  rets=[(0x3000, (10,), np.float32)], stage=xla_ffi.STAGE_INITIALIZE,
                  attrs={"ncl_grid_x": np.int64(1), "ncl_block_x": np.int64(32),
                         "ncl_s_a": np.float32(1), "ncl_s_n": np.int64(10)})
    with RecordingDriver() as rec:
        assert call(handler, frame) is None
    assert rec.launches == [] and [name for _, name in rec.functions] == ["scale"]


def test_foreign_kernel_on_xla_cpu_says_it_runs_on_gpus_only(foreign_scale):
    k = jax_kernel(foreign_scale, lambda x, a, n: x, (1, 32),
                   scalars={"a": np.float32, "n": np.int64})
    x = jax.device_put(np.ones(8, np.float32), jax.devices("cpu")[0])
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda x: k(x, a=1.0, n=8))(x))
    text = str(info.value)
    assert "jax_kernel of foreign kernel kernel 'scale' was called on XLA:CPU" not in text
    assert "jax_kernel of foreign kernel 'scale' was called on XLA:CPU" in text
    assert "numba-cuda's CUDA simulator cannot run it" in text and "call it on a GPU" in text


def test_triton_scratch_parameters_are_not_scalars():
    from test_kernel_sources_cpu import fake_triton

    k = ncl.foreign_kernel(fake_triton())
    params = [p.name for p in k.params]
    assert params[-2:] == ["global_scratch", "profile_scratch"]
    jk = jax_kernel(k, lambda x, n: x, (1, 128), scalars={"n": np.int32})
    handler = jk.handler([spec(64)], [spec(64)])
    frame = Frame(FakeXla(), args=[(0x1000, (64,), np.float32)],
                  rets=[(0x3000, (64,), np.float32)], attrs=launch_attrs(1, 128, n=np.int32(64)))
    with RecordingDriver() as rec:
        assert call(handler, frame) is None
    (launch,) = rec.launches
    # x, out, n, then the two scratch pointers Triton's launcher passes NULL
    assert launch.params == [struct.pack("<Q", 0x1000), struct.pack("<Q", 0x3000),
                             struct.pack("<i", 64), bytes(8), bytes(8)]


def test_something_else_is_refused_naming_every_source():
    with pytest.raises(TypeError) as info:
        jax_kernel(len, lambda x: x, (1, 32))
    text = str(info.value)
    assert text.startswith("jax_kernel() needs a kernel: a @cuda.jit kernel of numba-cuda or "
                           "numba-cuda-mlir, or a foreign kernel")
    assert "builtin_function_or_method" in text


# -- numba-cuda-mlir kernels ---------------------------------------------------------

@pytest.fixture(scope="module")
def mlir():
    numba_cuda_mlir = pytest.importorskip("numba_cuda_mlir")
    from numba import cuda

    if not cuda.is_available():
        ncl.set_compute_capability(ncl.get_compute_capability() or (9, 0))
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit
    def mscale(x, out, a):
        i = mcuda.grid(1)
        if i < out.shape[0]:
            out[i] = a * x[i]

    @mcuda.jit(device=True)
    def mdevice(x):
        return x + 1

    return numba_cuda_mlir, mscale, mdevice


def test_mlir_kernel_handler_passes_memref_descriptors(mlir):
    from numba_cuda_launch.kernels import numba_cuda_mlir as compat_mlir

    _, mscale, _ = mlir
    k = jax_kernel(mscale, lambda x, a: x, lambda x, a: ((x.shape[0] + 127) // 128, 128),
                   scalars={"a": np.float32})
    handler = k.handler([spec(1000)], [spec(1000)])
    a = np.float32(rng.standard_normal())
    xla = FakeXla(stream=0xBEEF)
    frame = Frame(xla, args=[(0x1000, (1000,), np.float32)],
                  rets=[(0x3000, (1000,), np.float32)], attrs=launch_attrs(8, 128, a=a))
    layouts = {compat_mlir.kernel_entry_name(o): compat_mlir.kernel_param_sizes(o)
               for o in mscale.overloads.values()}
    with RecordingDriver(layouts=layouts) as rec:
        assert call(handler, frame) is None
    (launch,) = rec.launches
    assert xla.errors == [] and launch.stream == 0xBEEF and launch.grid == (8, 1, 1)

    def memref(address, n):  # allocated, aligned, offset, shape, stride in elements
        return [struct.pack("<q", v) for v in (address, address, 0, n, 1)]
    assert launch.params == memref(0x1000, 1000) + memref(0x3000, 1000) + \
        [struct.pack("<f", a)]


def test_mlir_kernel_handlers_of_one_layout_pass_strides_in_items(mlir):
    # float32 and float64 share one handler body: each launches its own
    # overload, strides counted in items (not bytes) for both
    from numba_cuda_launch.kernels import numba_cuda_mlir as compat_mlir

    _, mscale, _ = mlir
    k = jax_kernel(mscale, lambda x, a: x, lambda x, a: ((x.shape[0] + 127) // 128, 128),
                   scalars={"a": np.float32})
    handlers = [k.handler([spec(64, d)], [spec(64, d)]) for d in (np.float32, np.float64)]
    assert handlers[0].body is handlers[1].body
    a, n = np.float32(rng.standard_normal()), int(rng.integers(1, 5000))
    layouts = {}
    xla = FakeXla()
    with RecordingDriver() as rec:
        for h, d in zip(handlers, (np.float32, np.float64)):
            layouts.update({compat_mlir.kernel_entry_name(o): compat_mlir.kernel_param_sizes(o)
                            for o in mscale.overloads.values()})
            rec.layouts.update(layouts)
            assert call(h, Frame(xla, args=[(0x1000, (n,), d)], rets=[(0x3000, (n,), d)],
                                 attrs=launch_attrs(8, 128, a=a))) is None
    assert xla.errors == [] and len({l.kernel for l in rec.launches}) == 2

    def memref(address):  # allocated, aligned, offset, shape, stride in elements
        return [struct.pack("<q", v) for v in (address, address, 0, n, 1)]
    for launch in rec.launches:
        assert launch.params == memref(0x1000) + memref(0x3000) + [struct.pack("<f", a)]


def test_mlir_eager_kernel_of_any_layout_arrays_takes_each_dtypes_strides(mlir):
    # overloads of layout-A arrays are checked for strides of whole items:
    # with the float64 signature's body, the float32 one's 4-byte strides
    # are whole items of its own size
    from numba_cuda_launch.kernels import numba_cuda_mlir as compat_mlir
    from numba_cuda_mlir import cuda as mcuda

    @mcuda.jit(["void(float64[:], float64[:])", "void(float32[:], float32[:])"])
    def mcopy(x, out):
        i = mcuda.grid(1)
        if i < out.shape[0]:
            out[i] = x[i]

    k = jax_kernel(mcopy, lambda x: x, (1, 32))
    dtypes = (np.float64, np.float32)
    handlers = [k.handler([spec(64, d)], [spec(64, d)]) for d in dtypes]
    assert handlers[0].body is handlers[1].body
    n = int(rng.integers(1, 5000))
    xla = FakeXla()
    layouts = {compat_mlir.kernel_entry_name(o): compat_mlir.kernel_param_sizes(o)
               for o in mcopy.overloads.values()}
    with RecordingDriver(layouts=layouts) as rec:
        for h, d in zip(handlers, dtypes):
            assert call(h, Frame(xla, args=[(0x1000, (n,), d)], rets=[(0x3000, (n,), d)],
                                 attrs=launch_attrs(1, 32))) is None
    assert xla.errors == [] and len({l.kernel for l in rec.launches}) == 2
    for launch in rec.launches:  # allocated, aligned, offset, shape, stride in items
        assert launch.params == [struct.pack("<q", v) for v in
                                 (0x1000, 0x1000, 0, n, 1, 0x3000, 0x3000, 0, n, 1)]


def test_mlir_kernel_target_names_come_from_its_python_function(mlir):
    _, mscale, _ = mlir
    k = jax_kernel(mscale, lambda x, a: x, (1, 32), scalars={"a": np.float32})
    name = k.register(spec(4), a=1.0)
    assert name.startswith("ncl.test_jax_sources_cpu.mlir._locals_.mscale.float32r1.float32r1."
                           "float32.")


def test_mlir_device_function_is_refused(mlir):
    _, _, mdevice = mlir
    with pytest.raises(TypeError, match="jax_kernel\\(\\) needs a kernel; 'mdevice' is a "
                                        "device function"):
        jax_kernel(mdevice, lambda x: x, (1, 32))


def test_mlir_kernel_on_xla_cpu_says_it_runs_on_gpus_only(mlir):
    _, mscale, _ = mlir
    k = jax_kernel(mscale, lambda x, a: x, (1, 32), scalars={"a": np.float32})
    x = jax.device_put(np.ones(8, np.float32), jax.devices("cpu")[0])
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda x: k(x, a=1.0))(x))
    assert "jax_kernel of numba-cuda-mlir kernel 'mscale' was called on XLA:CPU" in \
        str(info.value)
