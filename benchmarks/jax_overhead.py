"""Numba kernels in jax.jit: per-call cost against jnp, a ctypes Python
handler and a raw C cuLaunchKernel loop, all in one run.

    python benchmarks/jax_overhead.py [--json out.json]

Rows (microseconds): one `jax.jit` call (dispatch + one kernel, calls back
to back, blocking at the end), and per custom call inside one jit of 50
chained calls. (a) the same computation in jnp; (b) this project's handler
(a nopython cfunc); (c) a handler written as a ctypes Python callback that
launches with numba-cuda from Python, the design other libraries use.
"""

import argparse
import ctypes
import json
import os
import sys
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba.core import types as nt  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402
from numba_cuda_launch import xla_ffi  # noqa: E402
from numba_cuda_launch.jax import jax_kernel  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import launch_overhead as lo  # noqa: E402

N = 1024
CHAIN = 50


@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def launch_rule(x, y, a):
    return (x.shape[0] + 255) // 256, 256


NCL = jax_kernel(saxpy, lambda x, y, a: x, launch_rule, scalars={"a": np.float32})
# The same without declaring command-buffer compatibility: XLA then calls the
# handler on every execution instead of replaying a captured CUDA graph.
NCL_NO_GRAPH = jax_kernel(saxpy, lambda x, y, a: x, launch_rule, scalars={"a": np.float32},
                          command_buffer=False, name="ncl_bench_no_graph")


# -- (c) a ctypes Python callback handler -----------------------------------------

_HANDLER_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
_STREAM_GET_T = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)


def _u64(addr):
    return ctypes.c_uint64.from_address(addr).value


def _i32(addr):
    return ctypes.c_int32.from_address(addr).value


def _device_array(buf):
    data, rank, dims = _u64(buf + 24), _u64(buf + 32), _u64(buf + 40)
    shape = tuple(ctypes.c_int64.from_address(dims + 8 * d).value for d in range(rank))
    cai = {"shape": shape, "typestr": "<f4", "data": (data, False), "version": 3}
    return cuda.from_cuda_array_interface(cai, owner=None, sync=False)


def _python_handler(frame):
    ext = _u64(frame + 8)
    if ext and _i32(ext + 8) == 1:  # metadata query
        meta = _u64(ext + 24)
        major, minor = xla_ffi.api_version()
        api = _u64(frame + 16)
        if api:
            major, minor = _i32(api + 32), _i32(api + 36)
        ctypes.c_int32.from_address(meta + 24).value = major
        ctypes.c_int32.from_address(meta + 28).value = minor
        ctypes.c_uint32.from_address(meta + 32).value = 0
        return None
    args, rets = _u64(frame + 40 + 32), _u64(frame + 80 + 32)
    x, y = _device_array(_u64(args)), _device_array(_u64(args + 8))
    out = _device_array(_u64(rets))
    get_args = (ctypes.c_uint64 * 4)(32, 0, _u64(frame + 24), 0)
    api = _u64(frame + 16)
    _STREAM_GET_T(_u64(api + 80))(ctypes.addressof(get_args))
    stream = cuda.external_stream(get_args[3])
    saxpy[(out.size + 255) // 256, 256, stream](x, y, out, np.float32(2.0))
    return None


PY_HANDLER = _HANDLER_T(_python_handler)
jax.ffi.register_ffi_target("bench_python_handler", jax.ffi.pycapsule(PY_HANDLER),
                            platform="CUDA", api_version=1)


def python_saxpy(x, y):
    return jax.ffi.ffi_call("bench_python_handler", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


# -- measurement -------------------------------------------------------------------

def per_call_us(fn, *args, calls=2000, repeats=7):
    jax.block_until_ready(fn(*args))
    best = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        jax.block_until_ready(out)
        best.append((time.perf_counter() - t0) / calls * 1e6)
    return float(np.median(best))


def chained(step):
    @jax.jit
    def f(x, y):
        for _ in range(CHAIN):
            x = step(x, y)
        return x
    return f


def c_launch_us():
    """A raw cuLaunchKernel loop in C on the same saxpy kernel."""
    import tempfile

    clib = lo.build_c_baseline(tempfile.mkdtemp())
    if clib is None:
        return None
    argtypes = (nt.float32[::1],) * 3 + (nt.float32,)
    h = ncl.kernel_handle(saxpy, argtypes)
    dev = cuda.device_array(N, np.float32)
    ptr = dev.__cuda_array_interface__["data"][0]
    values = []
    for p in h.params:
        field = p.name.rsplit(".", 1)[-1]
        values.append({"meminfo": 0, "parent": 0, "nitems": N, "itemsize": 4, "data": ptr,
                       "shape[0]": N, "strides[0]": 4}.get(field, 0))
    storage = [ctypes.c_uint64(v) for v in values[:-1]] + [ctypes.c_float(2.0)]
    params = (ctypes.c_void_p * len(storage))(*[ctypes.addressof(s) for s in storage])
    libcuda = ctypes.CDLL("libcuda.so.1")
    launch = ctypes.cast(libcuda.cuLaunchKernel, ctypes.c_void_p).value
    stream = cuda.stream()
    status = ctypes.c_int()
    kh = h.handle

    def batch(n):
        clib.bench_launch(launch, kh, int(stream.handle), params, 4, 256, n, ctypes.byref(status))
    return lo.median_us(batch, stream.synchronize)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    args = parser.parse_args()
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("JAX sees no GPU: nothing to measure")
        return 0
    rng = np.random.default_rng()
    x = jnp.asarray(rng.standard_normal(N).astype(np.float32))
    y = jnp.asarray(rng.standard_normal(N).astype(np.float32))
    steps = {
        "(a) jnp": lambda x, y: 2.0 * x + y,
        "(b) numba-cuda-launch cfunc handler": lambda x, y: NCL(x, y, a=2.0),
        "(b') same, command_buffer=False": lambda x, y: NCL_NO_GRAPH(x, y, a=2.0),
        "(c) ctypes Python handler + numba-cuda launch": python_saxpy,
    }
    expect = np.asarray(2.0 * x + y)
    rows = {}
    for name, step in steps.items():
        one = jax.jit(step)
        np.testing.assert_allclose(np.asarray(one(x, y)), expect, rtol=1e-6)
        chain = chained(step)
        rows[name] = {"one jit call us": per_call_us(one, x, y),
                      "per chained call us": per_call_us(chain, x, y, calls=200) / CHAIN}
        print("%-48s one call %8.2f us | per call in a chain of %d: %8.2f us"
              % (name, rows[name]["one jit call us"], CHAIN, rows[name]["per chained call us"]),
              flush=True)
    c_us = c_launch_us()
    print("C cuLaunchKernel loop, same kernel: %s us" % ("%.2f" % c_us if c_us else "n/a"))
    a, b, b2, c = (rows[k] for k in steps)
    checks = [
        ("one jit call within 5% of jnp", b["one jit call us"] <= 1.05 * a["one jit call us"],
         b["one jit call us"] / a["one jit call us"]),
        (">= 30x faster than the ctypes Python handler (chained)",
         c["per chained call us"] >= 30 * b["per chained call us"],
         c["per chained call us"] / b["per chained call us"]),
    ]
    if c_us:
        for label, row in (("", b), (" (command_buffer=False)", b2)):
            checks.append(("per chained call <= 1.2x raw C cuLaunchKernel" + label,
                           row["per chained call us"] <= 1.2 * c_us,
                           row["per chained call us"] / c_us))
    for name, ok, value in checks:
        print("%s %s (%.2f)" % ("PASS" if ok else "FAIL", name, value))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": str(jax.devices()[0]), "jax": jax.__version__, "rows": rows,
                       "c_launch_us": c_us, "targets": checks}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
