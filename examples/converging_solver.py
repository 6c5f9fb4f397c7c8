"""A solver that stops on convergence without asking the host: Jacobi
iterations in a CUDA graph WHILE node whose last kernel decides whether to
go round again.

    .venv/bin/python examples/converging_solver.py

The graph is recorded once from compiled code: a conditional handle, a
WHILE node, and its body (two sweeps and a check) recorded from ordinary
launches on a second stream. The first sweep sets the condition to 0, the
check sets it back to 1 if any point moved more than the tolerance; one
``exe.launch`` runs the whole solve. The result and the iteration count are
checked against NumPy doing the same iterations on the host. Without a GPU
it runs under numba-cuda's CUDA simulator on a smaller grid.
"""

import _gpu_or_simulator  # noqa: F401  (before numba: the simulator without a GPU)

import numpy as np
from numba import cuda, njit

import numba_cuda_launch  # noqa: F401  (enables kernel[...] in CPU code)
from numba_cuda_launch import graphs

TB = 16  # threads per block along each axis


@cuda.jit
def sweep(src, dst, done, first):
    i, j = cuda.grid(2)
    if first and i == 0 and j == 0:
        graphs.set_conditional(done, 0)  # stop, unless the check says otherwise
    if 0 < i < dst.shape[0] - 1 and 0 < j < dst.shape[1] - 1:
        dst[i, j] = np.float32(0.25) * (src[i - 1, j] + src[i + 1, j]
                                        + src[i, j - 1] + src[i, j + 1])


@cuda.jit
def check(u, v, tol, done, count):
    i, j = cuda.grid(2)
    if i == 0 and j == 0:
        count[0] += 1
    if i < u.shape[0] and j < u.shape[1] and abs(u[i, j] - v[i, j]) > tol:
        graphs.set_conditional(done, 1)  # a point moved: go round again


@njit
def record_solver(u, v, count, tol, stream, body):
    """The executable graph of the whole solve (u holds the result)."""
    grid = ((u.shape[0] + TB - 1) // TB, (u.shape[1] + TB - 1) // TB)
    graphs.begin_capture(stream)
    done = graphs.conditional_handle(stream, 1)  # 1 at the start of each launch
    loop = graphs.add_while(stream, done)
    graphs.begin_body(body, loop)                # body's launches fill the loop
    sweep[grid, (TB, TB), body](u, v, done, True)
    sweep[grid, (TB, TB), body](v, u, done, False)
    check[grid, (TB, TB), body](u, v, tol, done, count)
    graphs.end_body(body)
    graph = graphs.end_capture(stream)
    exe = graph.instantiate()
    graph.destroy()  # the executable graph does not need it
    return exe


def reference(u0, tol):
    """The same iterations with NumPy: the grid and how many it took."""
    u, v, n = u0.copy(), u0.copy(), 0
    while True:
        v[1:-1, 1:-1] = np.float32(0.25) * (u[:-2, 1:-1] + u[2:, 1:-1]
                                            + u[1:-1, :-2] + u[1:-1, 2:])
        u[1:-1, 1:-1] = np.float32(0.25) * (v[:-2, 1:-1] + v[2:, 1:-1]
                                            + v[1:-1, :-2] + v[1:-1, 2:])
        n += 1
        if not (np.abs(u - v) > tol).any():
            return u, n


def main():
    simulated = cuda.config.ENABLE_CUDASIM
    n, tol = (8, np.float32(1e-3)) if simulated else (256, np.float32(1e-4))
    u0 = np.zeros((n, n), np.float32)
    u0[0, :] = 1  # the top edge is held at 1, the others at 0
    u, v = cuda.to_device(u0), cuda.to_device(u0)
    count = cuda.to_device(np.zeros(1, np.int32))
    stream, body = cuda.stream(), cuda.stream()
    exe = record_solver(u, v, count, tol, stream, body)
    exe.launch(stream)  # the whole solve: the GPU decides when to stop
    stream.synchronize()
    exe.destroy()
    got, iterations = u.copy_to_host(), int(count.copy_to_host()[0])
    want, want_iterations = reference(u0, tol)
    assert iterations == want_iterations, (iterations, want_iterations)
    assert np.allclose(got, want, atol=1e-6), np.abs(got - want).max()
    print("converged on the %s after %d iterations (NumPy: %d), %dx%d grid, tolerance %g"
          % ("CUDA simulator" if simulated else "GPU", iterations, want_iterations, n, n,
             tol))


if __name__ == "__main__":
    main()
