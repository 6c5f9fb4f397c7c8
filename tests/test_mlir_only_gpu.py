"""numba-cuda-mlir kernels on a GPU with PyTorch tensors as device arrays
(no numba-cuda needed): a dependent chain of kernels calling the
``griddepcontrol_*`` functions and a converging loop recorded as one CUDA
graph (a WHILE node whose kernels set its condition), each checked against
NumPy on fresh random inputs, outputs poisoned first."""

import numpy as np
import pytest

pytest.importorskip("numba_cuda_mlir")
torch = pytest.importorskip("torch")

from support.mlir_kernels import (chain, numpy_solve, record_solver,  # noqa: E402
                                  scale_add, scale_add_blocks)

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


def test_dependent_chain_of_mlir_kernels_matches_numpy():
    n = 100_003
    x = torch.from_numpy(rng.random(n, dtype=np.float32)).cuda()
    y = torch.from_numpy(rng.random(n, dtype=np.float32)).cuda()
    out = torch.full((n,), float("nan"), device="cuda")
    stream = torch.cuda.current_stream()
    chain(out, x, y, stream.cuda_stream, 50)
    stream.synchronize()
    expected = 2 * x.cpu().numpy() + y.cpu().numpy()
    assert np.array_equal(out.cpu().numpy(), expected)


def test_converging_loop_of_mlir_kernels_matches_numpy():
    # 64 points: about 3,000 iterations (256 took 36,000: over two minutes on a
    # GPU time-sliced between a dozen test processes)
    n, tol = 64, np.float32(1e-4)
    start = rng.random(n, dtype=np.float32)
    u = torch.from_numpy(start.copy()).cuda()
    v = torch.from_numpy(start.copy()).cuda()
    stream, body = torch.cuda.Stream(), torch.cuda.Stream()
    torch.cuda.synchronize()
    exe = record_solver(u, v, tol, stream.cuda_stream, body.cuda_stream)
    try:
        exe.launch(stream.cuda_stream)
        stream.synchronize()
    finally:
        exe.destroy()
    result = u.cpu().numpy()
    # converged: one more iteration moves no point by more than tol ...
    again = result.copy()
    again[1:-1] = np.float32(0.5) * (result[:-2] + result[2:])
    assert np.abs(again - result).max() <= 2 * tol
    # ... at NumPy's solution, within what an iteration more or less moves
    # (the stopping iteration depends on rounding at the tolerance)
    np.testing.assert_allclose(result, numpy_solve(start.copy(), tol), rtol=0, atol=2 * tol)


def test_tvm_ffi_function_of_an_mlir_kernel_on_torch_tensors_matches_numpy():
    pytest.importorskip("tvm_ffi")
    from numba_cuda_launch import tvm_ffi as ntf

    fn = ntf.tvm_ffi_kernel(scale_add, scale_add_blocks, arrays=[(np.float32, 2)] * 3,
                            scalars={"a": np.float32})
    rows, cols = (int(v) for v in rng.integers(100, 700, size=2))
    x, y = (rng.standard_normal((rows, cols)).astype(np.float32) for _ in range(2))
    a = np.float32(rng.standard_normal())
    out = torch.full((rows, cols), float("nan"), device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):  # TVM-FFI takes torch's current stream
        fn(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda(), out, float(a))
    stream.synchronize()
    expected = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)  # one rounding (fma)
    np.testing.assert_allclose(out.cpu().numpy(), expected, rtol=1e-6, atol=1e-6)
