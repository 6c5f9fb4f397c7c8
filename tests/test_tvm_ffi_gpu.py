"""Kernels as TVM-FFI functions on a GPU: called with PyTorch, CuPy, JAX and
numba-cuda arrays; inside torch.compile through torch.library.custom_op and
inside jax.jit through jax-tvm-ffi; with every launch form; refusals; a C
library loaded by tvm_ffi.load_module. Results against NumPy on fresh inputs,
outputs poisoned first."""

import os

import numpy as np
import pytest

from support import needs_numba_cuda

needs_numba_cuda()
tvm_ffi = pytest.importorskip("tvm_ffi")

from numba import cuda  # noqa: E402

from numba_cuda_launch import aot  # noqa: E402
from numba_cuda_launch import tvm_ffi as ntf  # noqa: E402
from support.kernels import axpy, axpy_blocks  # noqa: E402

pytestmark = pytest.mark.gpu
HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng()


@pytest.fixture(scope="module")
def fn():
    return ntf.tvm_ffi_kernel(axpy, axpy_blocks, arrays=[(np.float32, 1)] * 3,
                              scalars={"a": np.float32})



def fma(a, x, y):
    """``a * x + y`` rounded once to float32, as the kernel's fused
    multiply-add computes it (NumPy's float32 ``a * x + y`` rounds twice,
    which differs where the sum cancels)."""
    return (np.float64(a) * x.astype(np.float64) + y.astype(np.float64)).astype(np.float32)

def inputs(n=None):
    n = n or int(rng.integers(1000, 100000))
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    return x, y, np.float32(rng.standard_normal())


def test_torch_tensors_on_torch_s_current_stream(fn):
    torch = pytest.importorskip("torch")
    x, y, a = inputs()
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    out = torch.full_like(tx, float("nan"))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        fn(tx, ty, out, float(a))
    s.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), fma(a, x, y), rtol=1e-6)


def test_cupy_and_numba_cuda_arrays(fn):
    # TVM-FFI 0.1.15 passes a CuPy array as a Python object: through
    # tvm_ffi.from_dlpack it is a tensor; a numba-cuda device array has no
    # __dlpack__, so through CuPy's view of it (CAI) first
    import tvm_ffi

    cp = pytest.importorskip("cupy")
    x, y, a = inputs()
    out = cp.full(x.size, cp.nan, cp.float32)
    t = tvm_ffi.from_dlpack
    fn(t(cp.asarray(x)), t(cp.asarray(y)), t(out), float(a))
    cp.cuda.Device().synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), fma(a, x, y), rtol=1e-6)
    dout = cuda.to_device(np.full(x.size, np.nan, np.float32))
    fn(*[t(cp.asarray(d)) for d in (cuda.to_device(x), cuda.to_device(y), dout)], float(a))
    cuda.synchronize()
    np.testing.assert_allclose(dout.copy_to_host(), fma(a, x, y), rtol=1e-6)


def test_jax_arrays_and_jax_jit_through_jax_tvm_ffi(fn):
    jax = pytest.importorskip("jax")
    pytest.importorskip("jax_tvm_ffi")
    x, y, a = inputs()
    f = ntf.jax_function(fn, lambda x, y, a: jax.ShapeDtypeStruct(x.shape, x.dtype))
    out = jax.jit(lambda x, y: f(x, y, a=a))(x, y)
    np.testing.assert_allclose(np.asarray(out), fma(a, x, y), rtol=1e-6)
    # a JAX array passed straight to the function (DLPack)
    jout = jax.numpy.full(x.size, jax.numpy.nan, jax.numpy.float32)
    jx, jy = jax.numpy.asarray(x), jax.numpy.asarray(y)
    jout.block_until_ready()
    fn(jx, jy, jout, float(a))
    cuda.synchronize()
    np.testing.assert_allclose(np.asarray(jout), fma(a, x, y), rtol=1e-6)


def test_torch_compile_through_a_custom_op(fn):
    torch = pytest.importorskip("torch")

    x, y, a = inputs()

    @torch.library.custom_op("ncl_test::axpy", mutates_args=())
    def axpy_op(x: torch.Tensor, y: torch.Tensor, a: float) -> torch.Tensor:
        out = torch.empty_like(x)
        fn(x, y, out, a)
        return out

    @axpy_op.register_fake
    def _(x, y, a):
        return torch.empty_like(x)

    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    # a Python float (float() of a NumPy scalar inside the compiled function
    # is traced as a data-dependent symbolic float, which a custom op's float
    # argument cannot take)
    scale = float(a)
    compiled = torch.compile(lambda x, y: axpy_op(x, y, scale) + 1, fullgraph=True)
    out = compiled(tx, ty)
    expected = torch.empty_like(tx)
    axpy[(x.size + 255) // 256, 256](tx, ty, expected, a)  # the kernel's own launch
    torch.cuda.synchronize()
    np.testing.assert_array_equal(out.cpu().numpy(), expected.cpu().numpy() + 1)


@cuda.jit
def block_sum(x, out):
    buf = cuda.shared.array(0, np.float32)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    buf[t] = x[i] if i < x.size else np.float32(0)
    cuda.syncthreads()
    if t == 0:
        s = np.float32(0)
        for k in range(cuda.blockDim.x):
            s += buf[k]
        out[cuda.blockIdx.x] = s


@pytest.mark.parametrize("form", ["sharedmem", "cluster", "dependent"])
def test_launch_forms(form):
    cp = pytest.importorskip("cupy")
    if form in ("cluster", "dependent") and cuda.get_current_device().compute_capability < (9, 0):
        pytest.skip("needs sm_90")
    kw = dict(sharedmem=128 * 4)
    if form == "cluster":
        kw["cluster"] = 2
    if form == "dependent":
        kw["dependent"] = True
    f = ntf.tvm_ffi_kernel(block_sum, (8, 128), arrays=[(np.float32, 1)] * 2, **kw)
    x = rng.standard_normal(1024).astype(np.float32)
    out = cp.full(8, cp.nan, cp.float32)
    f(cp.asarray(x), out)
    cp.cuda.Device().synchronize()
    np.testing.assert_allclose(cp.asnumpy(out), x.reshape(8, 128).sum(1), rtol=1e-4)


@cuda.jit
def grid_total(x, out):
    g = cuda.cg.this_grid()
    i = cuda.grid(1)
    if i == 0:
        out[0] = 0
    g.sync()
    if i < x.size:
        cuda.atomic.add(out, 0, x[i])


def test_cooperative_kernel():
    cp = pytest.importorskip("cupy")
    f = ntf.tvm_ffi_kernel(grid_total, (4, 64), arrays=[(np.float32, 1)] * 2)
    x = rng.standard_normal(256).astype(np.float32)
    out = cp.full(1, cp.nan, cp.float32)
    f(cp.asarray(x), out)
    cp.cuda.Device().synchronize()
    np.testing.assert_allclose(cp.asnumpy(out)[0], x.sum(), rtol=1e-4)


def test_refusals_launch_nothing(fn):
    torch = pytest.importorskip("torch")
    x, y, a = inputs(1000)
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    out = torch.full_like(tx, float("nan"))
    for args, kind, text in [
            ((tx, ty.double(), out, 1.0), TypeError, "parameter 'y' (argument 1)"),
            ((tx, ty, out.cpu(), 1.0), TypeError, "parameter 'out' (argument 2)"),
            ((tx, torch.zeros(2000, device="cuda")[::2], out, 1.0), ValueError,
             "parameter 'y' (argument 1) is not C-contiguous"),
            ((tx, ty, out.view(10, 100), 1.0), TypeError, "of rank 2"),
            ((tx, ty, out), TypeError, "takes 4 arguments")]:
        with pytest.raises(kind) as info:
            fn(*args)
        assert "CUDA kernel 'axpy'" in str(info.value) and text in str(info.value)
    torch.cuda.synchronize()
    assert torch.isnan(out).all()


def test_a_c_library_through_tvm_ffi_load_module(fn, tmp_path):
    torch = pytest.importorskip("torch")
    lib = aot.build(str(tmp_path / "libaxpyffi.so"), tvm_ffi_functions={"axpy": fn})
    f = tvm_ffi.load_module(lib.path).axpy
    x, y, a = inputs()
    tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
    out = torch.full_like(tx, float("nan"))
    f(tx, ty, out, float(a))
    torch.cuda.synchronize()
    np.testing.assert_allclose(out.cpu().numpy(), fma(a, x, y), rtol=1e-6)
    with pytest.raises(TypeError, match="parameter 'y' \\(argument 1\\)"):
        f(tx, ty.double(), out, 1.0)


def test_a_cxx_program_calls_the_library_s_function(fn, tmp_path):
    import shutil
    import subprocess

    import tvm_ffi.libinfo

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    lib = aot.build(str(tmp_path / "libaxpycxx.so"), tvm_ffi_functions={"axpy": fn})
    libdir = os.path.dirname(tvm_ffi.libinfo.find_libtvm_ffi())
    exe = str(tmp_path / "caller")
    cmd = [nvcc, "-std=c++17", "-o", exe, os.path.join(HERE, "tvm_ffi_caller.cc")] \
        + ["-I" + p for p in tvm_ffi.libinfo.include_paths()] \
        + ["-L" + libdir, "-ltvm_ffi", "-Xlinker", "-rpath=" + libdir]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    run = subprocess.run([exe, lib.path], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    ok, refused = run.stdout.splitlines()[:2]
    assert ok.startswith("ok ") and float(ok.split()[1]) < 1e-5
    assert refused.startswith("refused: TypeError: numba_cuda_launch: CUDA kernel 'axpy': "
                              "parameter 'y' (argument 1) must be a float32 tensor")
