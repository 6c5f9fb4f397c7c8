"""Numba kernels inside jax.jit on a GPU, against NumPy on fresh random data."""

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from support.childenv import PREAMBLE, child_env  # noqa: F401
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from numba_cuda_launch.jax import jax_kernel  # noqa: E402

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(
    not any(d.platform == "gpu" for d in jax.devices()) if cuda.is_available() else True,
    reason="JAX has no GPU here")]
rng = np.random.default_rng()


@pytest.fixture(autouse=True, scope="module")
def x64():
    # float64 and complex inputs must not be narrowed by JAX.
    old = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    yield
    jax.config.update("jax_enable_x64", old)


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@cuda.jit
def twice_plus(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + x[i] + y[i]


def grid_for(x, *rest, **kw):
    return (x.shape[0] + 255) // 256, 256


TWICE_PLUS = jax_kernel(twice_plus, lambda x, y: x, grid_for)


def random(shape, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-1000, 1000, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32, np.complex64])
def test_dtypes(dtype):
    x, y = random(5000, dtype), random(5000, dtype)
    out = jax.jit(TWICE_PLUS)(x, y)
    assert out.dtype == dtype
    np.testing.assert_array_equal(np.asarray(out), x + x + y)


def test_one_body_serves_every_dtype_and_rank_of_its_layout():
    # one batch-aware kernel registered for four dtypes in one process: one
    # handler body, each signature launching its own overloads (1-D, and 2-D
    # under vmap) with its item sizes and strides
    @cuda.jit
    def affine(x, y, out):  # (n,), or (batch, n) under vmap
        if x.ndim == 1:
            j = cuda.grid(1)
            if j < out.shape[0]:
                out[j] = x[j] + x[j] - y[j]
        else:
            i, j = cuda.grid(2)
            if i < out.shape[0] and j < out.shape[1]:
                out[i, j] = x[i, j] + x[i, j] - y[i, j]

    @numba.njit
    def launch(xshape, yshape):
        if len(xshape) == 1:
            return ((xshape[0] + 127) // 128, 1), (128, 1)
        return (xshape[0], (xshape[1] + 127) // 128), (1, 128)

    k = jax_kernel(affine, lambda x, y: x, launch, vmap_method="broadcast_all")
    dtypes = [np.float32, np.float64, np.int32, np.complex128]
    for dtype in dtypes:
        rows, n = int(rng.integers(2, 7)), int(rng.integers(100, 3000))
        x, y = random((rows, n), dtype), random((rows, n), dtype)
        out = jax.jit(k)(x[0], y[0])
        assert out.dtype == dtype
        np.testing.assert_array_equal(np.asarray(out), x[0] + x[0] - y[0])
        out = jax.jit(jax.vmap(k))(x, y)
        np.testing.assert_array_equal(np.asarray(out), x + x - y)
    spec = [jax.ShapeDtypeStruct((8,), d) for d in dtypes]
    assert len({k.handler([s, s], [s]).body for s in spec}) == 1


@cuda.jit
def sum_diff(x, y, s, d):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        s[i, j] = x[i, j] + y[i, j]
        d[i, j] = x[i, j] - y[i, j]


def test_multiple_outputs_2d():
    k = jax_kernel(sum_diff, lambda x, y: (x, x),
                   lambda x, y: (((x.shape[0] + 15) // 16, (x.shape[1] + 15) // 16), (16, 16)))
    x, y = random((100, 70), np.float64), random((100, 70), np.float64)
    s, d = jax.jit(k)(x, y)
    np.testing.assert_array_equal(np.asarray(s), x + y)
    np.testing.assert_array_equal(np.asarray(d), x - y)


@cuda.jit
def axpb(x, out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + b


AXPB = jax_kernel(axpb, lambda x, a, b: x, lambda x, a, b: grid_for(x),
                  scalars={"a": np.float32, "b": np.int32})


def test_scalar_attributes():
    x = random(3000, np.float32)
    a, b = np.float32(rng.standard_normal()), int(rng.integers(-50, 50))
    out = jax.jit(lambda x: AXPB(x, a=a, b=b))(x)
    np.testing.assert_allclose(np.asarray(out), a * x.astype(np.float64) + b, rtol=1e-6, atol=1e-5)


@cuda.jit
def add_one_inplace(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] + 1


def test_input_output_alias():
    k = jax_kernel(add_one_inplace, lambda x: x, grid_for, input_output_aliases={0: 0})
    x = random(4096, np.float32)

    @jax.jit
    def f(x):
        y = x * 2
        return k(y)

    np.testing.assert_array_equal(np.asarray(f(x)), x * 2 + 1)


def test_vmap_sequential_and_batch_aware():
    xs, ys = random((6, 500), np.float32), random((6, 500), np.float32)
    out = jax.jit(jax.vmap(TWICE_PLUS))(xs, ys)
    np.testing.assert_array_equal(np.asarray(out), xs + xs + ys)

    @cuda.jit
    def twice_plus_batched(x, y, out):  # (n,), or (batch, n) under vmap
        if x.ndim == 1:
            j = cuda.grid(1)
            if j < out.shape[0]:
                out[j] = x[j] + x[j] + y[j]
        else:
            i, j = cuda.grid(2)
            if i < out.shape[0] and j < out.shape[1]:
                out[i, j] = x[i, j] + x[i, j] + y[i, j]

    @numba.njit
    def launch(xshape, yshape):  # run by the handler with the shapes XLA passes
        if len(xshape) == 1:
            return ((xshape[0] + 127) // 128, 1), (128, 1)
        return (xshape[0], (xshape[1] + 127) // 128), (1, 128)

    batched = jax_kernel(twice_plus_batched, lambda x, y: x, launch,
                         vmap_method="broadcast_all")
    out = jax.jit(jax.vmap(batched))(xs, ys)
    np.testing.assert_array_equal(np.asarray(out), xs + xs + ys)


@cuda.jit
def cube_kernel(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i] * x[i] * x[i]


@cuda.jit
def cube_grad_kernel(x, g, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 3 * x[i] * x[i] * g[i]


CUBE = jax_kernel(cube_kernel, lambda x: x, grid_for)
CUBE_GRAD = jax_kernel(cube_grad_kernel, lambda x, g: x, grid_for)


@jax.custom_vjp
def cube(x):
    return CUBE(x)


cube.defvjp(lambda x: (CUBE(x), x), lambda x, g: (CUBE_GRAD(x, g),))


def test_custom_vjp_gradient_matches_finite_differences():
    x = (rng.standard_normal(257) * 0.8).astype(np.float32)
    grad = np.asarray(jax.jit(jax.grad(lambda x: jnp.sum(jnp.sin(cube(x)))))(x))

    def loss(v):  # the same function, in float64 NumPy
        return np.sum(np.sin(v.astype(np.float64) ** 3))

    eps = 1e-6
    for i in rng.choice(257, 16, replace=False):
        e = np.zeros(257)
        e[i] = eps
        fd = (loss(x + e) - loss(x - e)) / (2 * eps)
        assert abs(grad[i] - fd) <= 1e-3 * max(1.0, abs(fd)), (i, grad[i], fd)


@numba.njit
def block_too_large(x_shape, y_shape):
    return 1, 4096  # refused by the driver (a trace-time launch like it is refused when traced)


def test_refused_launch_is_python_exception():
    # the launch rule's blockdim (4096 threads) is refused before the driver
    # is asked, as XLA's INVALID_ARGUMENT naming the kernel and the limit
    k = jax_kernel(twice_plus, lambda x, y: x, block_too_large)
    x = random(100, np.float32)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(k)(x, x))
    message = str(info.value)
    assert "INVALID_ARGUMENT" in message and "CUDA kernel 'twice_plus': blockdim must be" in \
        message and "got (4096, 1, 1) (from the launch rule)" in message, message
    # the device keeps working
    np.testing.assert_array_equal(np.asarray(jax.jit(TWICE_PLUS)(x, x)), 3 * x)


COMMAND_BUFFER_PROGRAM = """
import numpy as np, jax, jax.numpy as jnp
from numba import cuda
from numba_cuda_launch.jax import jax_kernel

@cuda.jit
def axpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

k = jax_kernel(axpy, lambda x, y, a: x, lambda x, y, a: ((x.shape[0] + 255) // 256, 256),
               scalars={"a": np.float32})

@jax.jit
def chain(x, y):
    for step in range(20):
        x = jnp.sin(k(x, y, a=np.float32(0.5)))
    return x

x = np.random.default_rng().standard_normal(10000).astype(np.float32)
y = np.random.default_rng().standard_normal(10000).astype(np.float32)
expect = x.astype(np.float64)
for step in range(20):
    expect = np.sin(0.5 * expect + y)
for rep in range(3):  # first run instantiates; later runs replay the graph
    got = np.asarray(chain(x, y))
    np.testing.assert_allclose(got, expect, rtol=2e-5, atol=2e-5)
hlo = chain.lower(x, y).compile().as_text()
print("OK", "command_buffer" in hlo or "CommandBuffer" in hlo)
"""


@pytest.mark.slow
def test_command_buffers_enabled():
    env = child_env(XLA_FLAGS="--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL "
                         "--xla_gpu_graph_min_graph_size=1",
               XLA_PYTHON_CLIENT_PREALLOCATE="false")
    out = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(COMMAND_BUFFER_PROGRAM)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("OK"), out.stdout


@pytest.mark.skipif(len([d for d in jax.devices() if d.platform == "gpu"]) < 2,
                    reason="needs 2 GPUs")
def test_sharded_jit_over_two_gpus_equals_one_gpu():
    # jax.jit of a jax_kernel call on arrays sharded over both GPUs: by
    # shard_map (each device's handler launches on its half), and left to
    # XLA's partitioner (the custom call runs where XLA places it); both
    # bit-equal to the same jit on one GPU, each device's image loaded there.
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    try:
        from jax import shard_map
    except ImportError:
        from jax.experimental.shard_map import shard_map
    devices = np.array(jax.devices()[:2])
    mesh = Mesh(devices, ("d",))
    x, y = random(2 * 40960, np.float32), random(2 * 40960, np.float32)

    def body(x, y):
        return jnp.sin(TWICE_PLUS(x, y)) * 2

    one = np.asarray(jax.jit(body)(jax.device_put(x, devices[0]), jax.device_put(y, devices[0])))
    halves = NamedSharding(mesh, P("d"))
    xs, ys = jax.device_put(x, halves), jax.device_put(y, halves)
    by_shard_map = jax.jit(shard_map(body, mesh=mesh, in_specs=(P("d"), P("d")),
                                     out_specs=P("d")))(xs, ys)
    by_xla = jax.jit(body, out_shardings=halves)(xs, ys)
    for out in (by_shard_map, by_xla):
        assert {s.device for s in out.addressable_shards} == set(devices)
        np.testing.assert_array_equal(np.asarray(out), one)
    np.testing.assert_allclose(one, np.sin(x + x + y) * 2, rtol=1e-6, atol=1e-6)


def test_scalars_bound_by_name_and_float16_scalar():
    # declared in another order than the kernel's parameters: bound by name
    k = jax_kernel(axpb, lambda x, a, b: x, lambda x, a, b: grid_for(x),
                   scalars={"b": np.int32, "a": np.float32})
    x = random(3000, np.float32)
    a, b = np.float32(rng.standard_normal()), int(rng.integers(-50, 50))
    out = jax.jit(lambda x: k(x, b=b, a=a))(x)
    np.testing.assert_allclose(np.asarray(out), a * x.astype(np.float64) + b, rtol=1e-6, atol=1e-5)

    @cuda.jit
    def scale_half(x, out, h):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] * h

    kh = jax_kernel(scale_half, lambda x, h: x, lambda x, h: grid_for(x),
                    scalars={"h": np.float16})
    xh = random(1000, np.float16)
    h = np.float16(rng.standard_normal() * 10)
    out = np.asarray(jax.jit(lambda x: kh(x, h=h))(xh))
    np.testing.assert_array_equal(out, xh * h)  # half multiply, rounded once


EXPORT_PROGRAM = """
import sys
import jax
import numba_cuda_launch.jax as J
import support.jax_export_kernels as m
exported = J.export(jax.jit(m.f))(m.X)
assert exported.platforms == ("cuda",), exported.platforms
open(sys.argv[1], "wb").write(exported.serialize())
print("NAMES", m.AXPB.target_names)
"""

CALL_EXPORTED_PROGRAM = """
import sys
import numpy as np
import jax
import numba_cuda_launch.jax as J
import support.jax_export_kernels as m  # registers the exported signature at import

def no_retrace(*args, **kwargs):
    raise AssertionError("the kernel was traced again")

m.AXPB._prepare = no_retrace
exported = J.deserialize(open(sys.argv[1], "rb").read())
x = np.random.default_rng().standard_normal(m.N).astype(np.float32)
out = np.asarray(jax.jit(exported.call)(x))
np.testing.assert_allclose(out, m.reference(x), rtol=1e-5, atol=1e-5)
print("NAMES", m.AXPB.target_names)
"""


def _run_child(program, *args, timeout=300):
    env = child_env(XLA_PYTHON_CLIENT_PREALLOCATE="false")
    env["PYTHONPATH"] = os.path.join(ROOT, "tests") + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(program), *args],
                         env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-4000:]
    return out.stdout


@pytest.mark.slow
def test_export_round_trip_two_processes(tmp_path):
    blob = str(tmp_path / "f.jax")
    exported = _run_child(EXPORT_PROGRAM, blob)
    called = _run_child(CALL_EXPORTED_PROGRAM, blob)
    names = [l for l in exported.splitlines() if l.startswith("NAMES")]
    assert names and names == [l for l in called.splitlines() if l.startswith("NAMES")]
    assert "ncl.support.jax_export_kernels.axpb.float32r1.float32r1.float32_int32." in names[0]


@pytest.mark.slow
@pytest.mark.skipif(len([d for d in jax.devices() if d.platform == "gpu"]) < 2,
                    reason="needs 2 GPUs")
def test_multiprocess_example_two_gpus(tmp_path):
    # the example's processes are no `-c` programs: the numpy shim reaches them
    # through a sitecustomize module
    (tmp_path / "sitecustomize.py").write_text(PREAMBLE)
    env = child_env()
    env["PYTHONPATH"] = str(tmp_path) + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "jax_multiprocess.py"),
                          "--timeout", "240"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-4000:]
    assert "OK: 2 processes" in out.stdout, out.stdout


@numba.njit
def _rule_of_zero_blocks(x_shape, y_shape):
    return 0, 256


def test_call_frames_that_differ_and_bad_launch_rules_are_named_on_a_gpu():
    # Calls made by hand (another frame producer) with what the handler
    # does not take, and an @njit launch rule giving grid 0: XLA errors
    # naming the kernel and what differs (tests/test_jax_cpu.py has every
    # case with frames built in memory).
    x, y = (jnp.asarray(random(1000, np.float32)) for _ in range(2))
    target = TWICE_PLUS.register(x, y)
    out = jax.ShapeDtypeStruct(x.shape, x.dtype)
    call = jax.ffi.ffi_call(target, out)
    good = dict(ncl_grid_x=np.int64(4), ncl_grid_y=np.int64(1), ncl_grid_z=np.int64(1),
                ncl_block_x=np.int64(256), ncl_block_y=np.int64(1), ncl_block_z=np.int64(1),
                ncl_sharedmem=np.int64(0))
    np.testing.assert_array_equal(np.asarray(call(x, y, **good)),
                                  2 * np.asarray(x) + np.asarray(y))
    prefix = "numba_cuda_launch: CUDA kernel 'twice_plus': "
    for attrs, said in [
            (dict(good, ncl_grid_Y=np.int64(1)), "the call has attribute 'ncl_grid_Y', which "
                                                 "the handler does not read"),
            # a value no other call gives: JAX's cache of eager ffi_calls takes
            # an int32 4 for the int64 4 of the call above
            (dict(good, ncl_grid_x=np.int32(5)), "attribute 'ncl_grid_x' is a scalar of int32; "
                                                 "the handler reads a scalar of int64"),
            (dict(good, ncl_block_x=np.int64(2048)), "blockdim must be 1..1024 in x and y and "
                                                     "1..64 in z with at most 1024 threads in "
                                                     "all, got (2048, 1, 1)")]:
        with pytest.raises(Exception) as info:
            jax.block_until_ready(call(x, y, **attrs))
        assert prefix + said in str(info.value)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.ffi.ffi_call(target, out)(x, **good))
    assert prefix + "the call has 1 argument(s) and 1 result(s); the handler takes 2 and 1" \
        in str(info.value)
    zero = jax_kernel(twice_plus, lambda x, y: x, _rule_of_zero_blocks)
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(zero)(x, y))
    assert prefix + ("griddim must be 1..2**31-1 in x and 1..65535 in y and z, got (0, 1, 1) "
                     "(from the launch rule)") in str(info.value)
