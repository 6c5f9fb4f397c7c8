"""numba-cuda-mlir kernels on a GPU with PyTorch tensors as device arrays
(no numba-cuda needed): a dependent chain of kernels calling the
``griddepcontrol_*`` functions and a converging loop recorded as one CUDA
graph (a WHILE node whose kernels set its condition), each checked against
NumPy on fresh random inputs, outputs poisoned first."""

import numba
import numpy as np
import pytest

pytest.importorskip("numba_cuda_mlir")
torch = pytest.importorskip("torch")

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import graphs  # noqa: E402
from numba_cuda_mlir import cuda as mcuda  # noqa: E402

pytestmark = pytest.mark.gpu
rng = np.random.default_rng()


@mcuda.jit
def producer(out, x):
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] = 2 * x[i]
    ncl.griddepcontrol_launch_dependents()


@mcuda.jit
def consumer(out, y):
    ncl.griddepcontrol_wait()
    i = mcuda.grid(1)
    if i < out.shape[0]:
        out[i] += y[i]


@numba.njit
def chain(out, x, y, stream, links):
    blocks = (out.shape[0] + 127) // 128
    for _ in range(links):
        producer[blocks, 128, stream](out, x)
        consumer[blocks, 128, stream].dependent()(out, y)


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


@mcuda.jit
def sweep(dst, src, done, first):
    i = mcuda.grid(1)
    if first and i == 0:
        graphs.set_conditional(done, 0)
    if 0 < i < dst.shape[0] - 1:
        dst[i] = np.float32(0.5) * (src[i - 1] + src[i + 1])


@mcuda.jit
def check(u, v, tol, done):
    i = mcuda.grid(1)
    if i < u.shape[0] and abs(u[i] - v[i]) > tol:
        graphs.set_conditional(done, 1)


@numba.njit
def record_solver(u, v, tol, stream, body):
    blocks = (u.shape[0] + 127) // 128
    graphs.begin_capture(stream)
    done = graphs.conditional_handle(stream, 1)
    loop = graphs.add_while(stream, done)
    graphs.begin_body(body, loop)
    sweep[blocks, 128, body](u, v, done, True)
    sweep[blocks, 128, body](v, u, done, False)
    check[blocks, 128, body](u, v, tol, done)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()
    return exe


def _numpy_solve(u, tol):
    v = u.copy()
    iterations = 0
    while True:
        iterations += 1
        v[1:-1] = np.float32(0.5) * (u[:-2] + u[2:])
        u[1:-1] = np.float32(0.5) * (v[:-2] + v[2:])
        if not (np.abs(u - v) > tol).any():
            return u, iterations


def test_converging_loop_of_mlir_kernels_matches_numpy():
    n, tol = 256, np.float32(1e-4)
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
    expected, _ = _numpy_solve(start.copy(), tol)
    assert np.allclose(u.cpu().numpy(), expected, rtol=0, atol=1e-5)
