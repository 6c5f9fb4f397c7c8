"""jax_kernel on XLA:CPU under numba-cuda's CUDA simulator
(NUMBA_ENABLE_CUDASIM=1): real kernels computing on XLA's host buffers inside
jax.jit, vmap and grad, checked against NumPy. Started by
tests/test_simulator.py."""

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from numba_cuda_launch import jax as ncl_jax  # noqa: E402
from numba_cuda_launch.jax import jax_kernel  # noqa: E402

assert cuda.config.ENABLE_CUDASIM, "run with NUMBA_ENABLE_CUDASIM=1"
CPU = jax.devices("cpu")[0]
rng = np.random.default_rng()


def on_cpu(*arrays):
    return [jax.device_put(a, CPU) for a in arrays]


@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def blocks_of_32(x, *rest, **scalars):
    return (x.shape[0] + 31) // 32, 32


SAXPY = jax_kernel(saxpy, lambda x, y, a: x, blocks_of_32, scalars={"a": np.float32})


def test_saxpy_in_jit():
    n = 100  # not a multiple of the block: the bounds check matters
    x, y = rng.standard_normal((2, n)).astype(np.float32)
    a = np.float32(rng.standard_normal())
    out = jax.jit(lambda x, y: SAXPY(x, y, a=a))(*on_cpu(x, y))
    np.testing.assert_allclose(np.asarray(out), a * x + y, rtol=1e-6)


def test_handler_is_registered_for_xla_cpu():
    name = SAXPY.register(jax.ShapeDtypeStruct((4,), np.float32),
                          jax.ShapeDtypeStruct((4,), np.float32), a=1.0)
    text = jax.jit(lambda x: SAXPY(x, x, a=1.0)).lower(np.ones(4, np.float32)).as_text()
    assert name in text and name in ncl_jax.registered_targets()


def test_vmap_sequential():
    x, y = rng.standard_normal((2, 5, 70)).astype(np.float32)
    out = jax.jit(jax.vmap(lambda x, y: SAXPY(x, y, a=-1.5)))(*on_cpu(x, y))
    np.testing.assert_allclose(np.asarray(out), -1.5 * x + y, rtol=1e-6)


@cuda.jit
def rows_twice(x, out):  # batch-aware: 1-D, or 2-D with a leading batch
    if x.ndim == 1:
        i = cuda.grid(1)
        if i < x.shape[0]:
            out[i] = 2 * x[i]
    else:
        b, i = cuda.grid(2)
        if b < x.shape[0] and i < x.shape[1]:
            out[b, i] = 2 * x[b, i]


@numba.njit
def rows_launch(shape):
    if len(shape) == 1:
        return (shape[0] + 31) // 32, 32
    return (shape[0], (shape[1] + 31) // 32), (1, 32)


def test_vmap_batch_aware_kernel_sees_the_batch():
    k = jax_kernel(rows_twice, lambda x: x, rows_launch, vmap_method="broadcast_all")
    x = rng.standard_normal((3, 50)).astype(np.float32)
    (xc,) = on_cpu(x)
    np.testing.assert_array_equal(np.asarray(jax.jit(jax.vmap(k))(xc)), 2 * x)
    np.testing.assert_array_equal(np.asarray(jax.jit(k)(xc[1])), 2 * x[1])


@cuda.jit
def square(x, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] * x[i]


@cuda.jit
def square_vjp(x, g, dx, a):
    i = cuda.grid(1)
    if i < dx.size:
        dx[i] = 2 * a * x[i] * g[i]


SQUARE = jax_kernel(square, lambda x, a: x, blocks_of_32, scalars={"a": np.float32})
SQUARE_VJP = jax_kernel(square_vjp, lambda x, g, a: x, blocks_of_32, scalars={"a": np.float32})


@jax.custom_vjp
def scaled_square(x):
    return SQUARE(x, a=3.0)


scaled_square.defvjp(lambda x: (scaled_square(x), x),
                     lambda x, g: (SQUARE_VJP(x, g, a=3.0),))


def test_grad_through_custom_vjp():
    x = rng.standard_normal(77).astype(np.float32)
    (xc,) = on_cpu(x)
    value, grad = jax.jit(jax.value_and_grad(lambda x: jnp.sum(jnp.sin(scaled_square(x)))))(xc)
    x = x.astype(np.float64)
    np.testing.assert_allclose(float(value), np.sum(np.sin(3.0 * x * x)), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(grad), np.cos(3.0 * x * x) * 6.0 * x, rtol=1e-4,
                               atol=1e-5)


@cuda.jit
def split(x, low, high, counts):
    # two outputs of the input's shape and one of another shape and dtype
    i = cuda.grid(1)
    if i < x.size:
        low[i] = min(x[i], 0.0)
        high[i] = max(x[i], 0.0)
    if i == 0:
        n = 0
        for j in range(x.size):
            if x[j] > 0:
                n += 1
        counts[0] = n
        counts[1] = x.size - n


def test_multiple_outputs():
    k = jax_kernel(split, lambda x: [x, x, jax.ShapeDtypeStruct((2,), np.int32)], blocks_of_32)
    x = rng.standard_normal(90).astype(np.float32)
    low, high, counts = jax.jit(k)(*on_cpu(x))
    np.testing.assert_array_equal(np.asarray(low), np.minimum(x, 0))
    np.testing.assert_array_equal(np.asarray(high), np.maximum(x, 0))
    assert list(np.asarray(counts)) == [int((x > 0).sum()), int((x <= 0).sum())]


@cuda.jit
def add_to_first_half(x, acc, out):
    # writes only the first half of `out`: the rest is what `acc` held, if
    # and only if `out` is `acc`'s buffer
    i = cuda.grid(1)
    if i < out.size // 2:
        out[i] = acc[i] + x[i]


def test_in_place_output_is_the_input_buffer():
    k = jax_kernel(add_to_first_half, lambda x, acc: acc, blocks_of_32,
                   input_output_aliases={1: 0})
    x, acc = rng.standard_normal((2, 64)).astype(np.float32)
    out = np.asarray(jax.jit(k, donate_argnums=1)(*on_cpu(x, acc)))
    np.testing.assert_array_equal(out[:32], acc[:32] + x[:32])
    np.testing.assert_array_equal(out[32:], acc[32:])


@cuda.jit
def mixed_scalars(x, out, scale, shift, flag, half):
    i = cuda.grid(1)
    if i < out.size:
        v = x[i] * scale + shift
        out[i] = v + half if flag else -v


def test_scalars_of_every_kind():
    k = jax_kernel(mixed_scalars, lambda x, **s: x, blocks_of_32,
                   scalars={"scale": np.float64, "shift": np.int16, "flag": np.bool_,
                            "half": np.float16})
    x = rng.standard_normal(40)
    scale, shift = rng.standard_normal(), int(rng.integers(-300, 300))
    half = np.float16(rng.standard_normal())
    f = jax.jit(lambda x, flag: k(x, scale=scale, shift=shift, flag=flag, half=half),
                static_argnums=1)
    jax.config.update("jax_enable_x64", True)
    try:
        (xc,) = on_cpu(x)
        np.testing.assert_allclose(np.asarray(f(xc, True)), x * scale + shift + float(half),
                                   rtol=1e-12)
        np.testing.assert_allclose(np.asarray(f(xc, False)), -(x * scale + shift), rtol=1e-12)
    finally:
        jax.config.update("jax_enable_x64", False)


@cuda.jit
def out_of_bounds(x, out):
    out[x.size + 1000] = 1.0  # the simulator checks indices


def test_failing_kernel_is_a_jax_error():
    k = jax_kernel(out_of_bounds, lambda x: x, (1, 1))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(k)(*on_cpu(np.ones(4, np.float32))))
    # named without a driver (it was "failed:  (719)")
    assert "CUDA kernel 'out_of_bounds' failed: CUDA_ERROR_LAUNCH_FAILED (719)" \
        in str(info.value)


@pytest.mark.parametrize("rule_result, said", [
    ((0, 32), "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got (0, 1, 1) (from "
              "the launch rule)"),
    (((1, 70000), 32), "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got "
                       "(1, 70000, 1) (from the launch rule)"),
    ((1, 2048), "blockdim must be 1..1024 in x and y and 1..64 in z with at most 1024 threads "
                "in all, got (2048, 1, 1) (from the launch rule)"),
    ((1, (32, 64)), "blockdim must be 1..1024 in x and y and 1..64 in z with at most 1024 "
                    "threads in all, got (32, 64, 1) (from the launch rule)"),
    ((-1, 32), "griddim must be 1..2**31-1 in x and 1..65535 in y and z, got (-1, 1, 1) (from "
               "the launch rule)"),
])
def test_a_launch_rule_out_of_cudas_limits_is_named_with_the_reason(rule_result, said):
    grid, block = rule_result

    @numba.njit
    def rule(x_shape, y_shape, a):
        return grid, block

    k = jax_kernel(saxpy, lambda x, y, a: x, rule, scalars={"a": np.float32})
    x, = on_cpu(np.ones(64, np.float32))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda x: k(x, x, a=1.0))(x))
    # the kernel, the item and the reason, as on a GPU (it was "CUDA kernel
    # 'saxpy' failed:  (1)")
    assert "numba_cuda_launch: CUDA kernel 'saxpy': " + said in str(info.value)


def test_saxpy_example_runs_on_xla_cpu():
    """examples/jax_saxpy.py as docs/jax.md says to run it without a GPU."""
    import os
    import subprocess
    import sys

    from support.childenv import PREAMBLE, ROOT, child_env

    example = os.path.join(ROOT, "examples", "jax_saxpy.py")
    code = PREAMBLE + "import runpy\nrunpy.run_path(%r, run_name='__main__')\n" % example
    out = subprocess.run([sys.executable, "-c", code], env=child_env(JAX_PLATFORMS="cpu"),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    lines = dict(line.split(":", 1) for line in out.stdout.splitlines() if ":" in line)
    x = np.arange(8, dtype=np.float32)
    got = np.array(lines["saxpy in jit"].strip(" []").split(), np.float32)
    np.testing.assert_array_equal(got, 3 * x + 1)
    got = np.array(lines["grad of sum(f)"].strip(" []").split(), np.float32)
    np.testing.assert_array_equal(got, np.full(8, 2, np.float32))


def test_kernels_the_simulator_cannot_run_are_refused_at_jax_kernel():
    import numba_cuda_launch as ncl
    from support.nvrtc import nvrtc_ptx

    source = r'''extern "C" __global__ void fill(float* out, float v) { out[threadIdx.x] = v; }'''
    k = ncl.foreign_kernel(nvrtc_ptx(source, ("-arch=compute_90",), "fill"), "fill",
                           "void(CPointer(float32), float32)")
    with pytest.raises(TypeError) as info:
        jax_kernel(k, lambda v: jax.ShapeDtypeStruct((32,), np.float32), (1, 32),
                   scalars={"v": np.float32})
    text = str(info.value)
    assert text.startswith("jax_kernel(): foreign kernel 'fill' cannot be launched here: this "
                           "process runs numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)")
    assert "this foreign kernel is machine code" in text and \
        "run without NUMBA_ENABLE_CUDASIM to launch it on a GPU" in text


def test_a_launch_rule_that_raises_fails_the_call():
    # (before: Numba printed the exception as unraisable, the handler returned
    # success without launching, and the output was uninitialised memory)
    @numba.njit
    def rule(x_shape, y_shape, a):
        return x_shape[0] // (x_shape[0] - 64), 32  # 64 items: a division by zero

    k = jax_kernel(saxpy, lambda x, y, a: x, rule, scalars={"a": np.float32})
    x, = on_cpu(np.ones(64, np.float32))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(lambda x: k(x, x, a=1.0))(x))
    assert "numba_cuda_launch: CUDA kernel 'saxpy': the launch rule raised an exception" \
        in str(info.value)
    y, = on_cpu(np.ones(65, np.float32))  # the same handler launches where the rule returns
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: k(x, x, a=1.0))(y)), 2)
