"""Numba kernels in jax.jit: per-call cost of this package's handler against
jnp, brainevent's numba-CUDA bridge, a ctypes Python handler and a raw C
cuLaunchKernel loop, with XLA's command buffers on (its default) and off.

    python benchmarks/jax_overhead.py [--json out.json] [--markdown out.md]

Rows (microseconds), all computing out = 2 x + y on 1024 float32:
(a) jnp; (b) this package's handler (a nopython cfunc), declared
command-buffer compatible; (b') the same declared incompatible (XLA calls it
on every execution); (b'') the same with the 2 passed as a scalar attribute;
(c) a handler written as a ctypes Python callback launching with numba-cuda
from Python; (d) brainevent's ``numba_cuda_kernel`` (brainevent 0.2.1,
``brainevent/_op/numba_cuda_ffi.py``: a ctypes Python callback as well);
(e) the kernel of (b'') written in CUDA C++, compiled to PTX and given to
``jax_kernel`` as a foreign kernel (the same handler path).
Columns: one ``jax.jit`` call (dispatch + one kernel, calls back to back,
blocking at the end); per custom call inside one jit of 50 chained calls;
the same with ``--xla_gpu_enable_command_buffer=`` (command buffers off,
measured in a child process, since XLA reads its flags once).

brainevent is optional: without it row (d) is left out (it needs brainunit,
saiunit and array_api_compat besides JAX).
"""

import argparse
import contextlib
import ctypes
import json
import os
import subprocess
import sys
import time

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
NO_COMMAND_BUFFERS = "--xla_gpu_enable_command_buffer="
if "--child-no-command-buffers" in sys.argv:  # before JAX reads XLA_FLAGS
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + NO_COMMAND_BUFFERS).strip()

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
GRID, BLOCK = (N + 255) // 256, 256


@cuda.jit
def axpy2(x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i] + y[i]


@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def launch_rule(x, *rest, **scalars):
    return (x.shape[0] + 255) // 256, 256


NCL = jax_kernel(axpy2, lambda x, y: x, launch_rule)
NCL_NO_CB = jax_kernel(axpy2, lambda x, y: x, launch_rule, command_buffer=False)
NCL_SCALAR = jax_kernel(saxpy, lambda x, y, a: x, launch_rule, scalars={"a": np.float32})


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
    axpy2[(out.size + 255) // 256, 256, stream](x, y, out)
    return None


PY_HANDLER = _HANDLER_T(_python_handler)
jax.ffi.register_ffi_target("bench_python_handler", jax.ffi.pycapsule(PY_HANDLER),
                            platform="CUDA", api_version=1)


def python_axpy2(x, y):
    return jax.ffi.ffi_call("bench_python_handler", jax.ShapeDtypeStruct(x.shape, x.dtype))(x, y)


# -- (d) brainevent's bridge ---------------------------------------------------------

def brainevent_axpy2():
    """brainevent's numba_cuda_kernel over the same kernel, or (None, why)."""
    try:
        import brainevent
        from brainevent._op.numba_cuda_ffi import numba_cuda_kernel

        fn = numba_cuda_kernel(axpy2, outs=jax.ShapeDtypeStruct((N,), jnp.float32),
                               grid=GRID, block=BLOCK)
    except Exception as exc:  # not installed, a dependency missing, no GPU
        return None, "brainevent not usable: %s: %s" % (type(exc).__name__, exc)
    return fn, "brainevent %s" % getattr(brainevent, "__version__", "?")


# -- measurement -------------------------------------------------------------------

def per_call_us(fn, *args, budget_s=0.2, repeats=5):
    """Median over *repeats* of the time per call of back-to-back calls,
    blocking at the end of each repeat; the number of calls is sized so a
    repeat takes about *budget_s*."""
    jax.block_until_ready(fn(*args))
    t0 = time.perf_counter()
    jax.block_until_ready(fn(*args))
    one = max(time.perf_counter() - t0, 1e-6)
    calls = int(min(5000, max(5, budget_s / one)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            out = fn(*args)
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t0) / calls * 1e6)
    return float(np.median(times))


def chained(step):
    @jax.jit
    def f(x, y):
        for _ in range(CHAIN):
            x = step(x, y)
        return x
    return f


def c_launch_us():
    """A raw cuLaunchKernel loop in C on the saxpy kernel (host cost per launch)."""
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
        clib.bench_launch(launch, kh, int(stream.handle), params, GRID, BLOCK, n,
                          ctypes.byref(status))
    return lo.median_us(batch, stream.synchronize)


def _frames_support():
    """tests/support/ffi_frames.py of this checkout, or None (a copy of the
    benchmarks without the tests: ci/bench_ab.sh says what to copy)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                    "tests"))
    try:
        from support import ffi_frames
    except ImportError:
        return None
    return ffi_frames


def handler_call_ns(reps=200_000):
    """Host nanoseconds per call of the handlers of rows (b) and (b'') on a
    call frame built in memory, the driver's cuLaunchKernel and XLA's
    Stream_Get native stubs: the handler's own cost (checking and reading
    the frame, the launch path), called from a compiled loop. No GPU needed:
    ``{row: ns}``, or None without tests/support."""
    import numba
    from numba_cuda_launch.cudadrv import driver
    from numba_cuda_launch.interop import xla_ffi as raw
    from numba_cuda_launch.testing import RecordingDriver

    frames = _frames_support()
    if frames is None:
        return None
    if ncl.get_compute_capability() is None and not cuda.is_available():
        ncl.set_compute_capability((9, 0))

    @numba.cfunc(nt.int32(nt.voidptr, nt.uint32, nt.uint32, nt.uint32, nt.uint32, nt.uint32,
                          nt.uint32, nt.uint32, nt.voidptr, nt.voidptr, nt.voidptr))
    def launched(f, gx, gy, gz, bx, by, bz, shmem, stream, params, extra):
        return 0

    @numba.cfunc(nt.voidptr(nt.voidptr))
    def stream_get(args):  # XLA_FFI_Stream_Get: the stream at offset 24
        raw._store_ptr(args, 24, raw.c_string("s"))
        return raw.ok()

    spec = jax.ShapeDtypeStruct((N,), np.float32)
    attrs = {"ncl_%s_%s" % (w, a): np.int64(v if a == "x" else 1)
             for w, v in (("grid", GRID), ("block", BLOCK)) for a in "xyz"}
    attrs["ncl_sharedmem"] = np.int64(0)
    out = {}
    for row, k, extra in (("(b)", NCL, {}), ("(b'')", NCL_SCALAR, {"ncl_s_a": np.float32(2)})):
        xla = frames.FakeXla()
        xla.api.stream_get = stream_get.address
        frame = frames.Frame(xla, args=[(0x1000, (N,), np.float32)] * 2,
                             rets=[(0x3000, (N,), np.float32)], attrs=dict(attrs, **extra))
        handler = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p)(k.handler([spec, spec],
                                                                             [spec]).address)

        @numba.cfunc(nt.int64(nt.voidptr, nt.int64))
        def calls(frame, reps):
            failed = 0
            for _ in range(reps):
                failed += handler(frame) != 0
            return failed

        # The first call loads the image: a recording driver's without a
        # GPU; with one the kernel may be loaded already, by the real driver.
        with contextlib.nullcontext() if cuda.is_available() else RecordingDriver():
            with driver.use_functions(cuLaunchKernel=launched.address):
                assert calls(frame.address, 1) == 0, xla.errors
        with driver.use_functions(cuLaunchKernel=launched.address):
            best = []
            for _ in range(7):
                t0 = time.perf_counter()
                assert calls(frame.address, reps) == 0, xla.errors
                best.append((time.perf_counter() - t0) / reps * 1e9)
        out[row] = float(min(best))
    return out


def frame_decode_ns(reps=2_000_000):
    """Host nanoseconds the handler spends reading one call frame: three
    buffer views, seven launch attributes and a scalar looked up by name, the
    stage (what an XLA instantiate-stage cache could save). No GPU needed."""
    import numba

    frames = _frames_support()
    if frames is None:
        return None
    FakeXla, Frame = frames.FakeXla, frames.Frame
    ffi = xla_ffi

    @numba.cfunc(nt.int64(nt.voidptr, nt.int64))
    def decode(frame, reps):
        acc = 0
        for _ in range(reps):
            a0 = ffi.buffer_as_array(ffi.arg_buffer(frame, 0), 1, np.float32)
            a1 = ffi.buffer_as_array(ffi.arg_buffer(frame, 1), 1, np.float32)
            a2 = ffi.buffer_as_array(ffi.ret_buffer(frame, 0), 1, np.float32)
            acc += (ffi.attr_int(frame, "ncl_grid_x") + ffi.attr_int(frame, "ncl_grid_y")
                    + ffi.attr_int(frame, "ncl_grid_z") + ffi.attr_int(frame, "ncl_block_x")
                    + ffi.attr_int(frame, "ncl_block_y") + ffi.attr_int(frame, "ncl_block_z")
                    + ffi.attr_int(frame, "ncl_sharedmem")
                    + np.int64(ffi.attr_float(frame, "ncl_s_a")) + ffi.execution_stage(frame)
                    + a0.shape[0] + a1.shape[0] + a2.shape[0])
        return acc

    xla = FakeXla()
    attrs = {"ncl_%s_%s" % (w, a): np.int64(v) for w, v in (("grid", GRID), ("block", BLOCK))
             for a in "xyz"}
    attrs.update(ncl_sharedmem=np.int64(0), ncl_s_a=np.float32(2))
    frame = Frame(xla, args=[(0x1000, (N,), np.float32)] * 2, rets=[(0x3000, (N,), np.float32)],
                  attrs=attrs)
    fn = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64)(decode.address)
    fn(frame.address, 10)
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        fn(frame.address, reps)
        best.append((time.perf_counter() - t0) / reps * 1e9)
    return float(min(best))


AXPY2_C = ('extern "C" __global__ void axpy2(const float* x, const float* y, float* out,'
           ' long long n) { long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;'
           ' if (i < n) out[i] = 2 * x[i] + y[i]; }')


def foreign_axpy2():
    """Row (e): the same kernel as PTX (cuda.core's NVRTC), a foreign
    kernel through jax_kernel; its n is a scalar attribute, as in (b'')."""
    from cuda.core import Program, ProgramOptions

    cc = cuda.get_current_device().compute_capability
    ptx = Program(AXPY2_C, "c++", ProgramOptions(arch="sm_%d%d" % cc)).compile("ptx")
    fk = ncl.foreign_kernel(ptx, "axpy2", "void(CPointer(float32), CPointer(float32), "
                            "CPointer(float32), int64)", param_names=["x", "y", "out", "n"])
    jk = jax_kernel(fk, lambda x, y, n: x, launch_rule, scalars={"n": np.int64})
    return lambda x, y: jk(x, y, n=x.shape[0])


def steps():
    be, be_note = brainevent_axpy2()
    rows = {
        "(a) jnp": lambda x, y: 2.0 * x + y,
        "(b) numba-cuda-launch cfunc handler": NCL,
        "(b') same, command_buffer=False": NCL_NO_CB,
        "(b'') same, the 2 as a scalar attribute": lambda x, y: NCL_SCALAR(x, y, a=2.0),
        "(e) the same kernel as PTX (foreign_kernel), n a scalar attribute": foreign_axpy2(),
        "(c) ctypes Python handler + numba-cuda launch": python_axpy2,
    }
    if be is not None:
        rows["(d) brainevent numba_cuda_kernel (ctypes Python handler)"] = be
    return rows, be_note


def measure():
    """{row: {"one jit call us", "per chained call us"}} in this process."""
    rng = np.random.default_rng()
    x = jnp.asarray(rng.standard_normal(N).astype(np.float32))
    y = jnp.asarray(rng.standard_normal(N).astype(np.float32))
    expect = 2.0 * np.asarray(x) + np.asarray(y)
    rows, note = steps()
    out = {}
    for name, step in rows.items():
        one = jax.jit(step)
        np.testing.assert_allclose(np.asarray(one(x, y)), expect, rtol=1e-6)
        chain = chained(step)
        out[name] = {"one jit call us": per_call_us(one, x, y),
                     "per chained call us": per_call_us(chain, x, y) / CHAIN}
        print("  %-58s one call %8.2f us | chained %8.2f us"
              % (name, out[name]["one jit call us"], out[name]["per chained call us"]),
              flush=True)
    return out, note


def no_command_buffer_run():
    """The chained rows measured in a child with command buffers off."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child-no-command-buffers"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    if done.returncode != 0:
        print("command-buffers-off run failed:\n" + done.stderr[-3000:])
        return {}
    return json.loads(done.stdout.strip().splitlines()[-1])


def markdown(rows, c_us, checks, device, note):
    lines = ["| | one `jax.jit` call (us) | per call, chain of %d (us) | per call, chain, "
             "command buffers off (us) |" % CHAIN, "|---|---|---|---|"]
    for name, r in rows.items():
        off = r.get("per chained call us, command buffers off")
        lines.append("| %s | %.2f | %.2f | %s |" % (
            name, r["one jit call us"], r["per chained call us"],
            "%.2f" % off if off is not None else "n/a"))
    if c_us:
        lines.append("| raw C `cuLaunchKernel` loop, same kernel (host cost per launch) "
                     "| – | %.2f | – |" % c_us)
    lines.append("")
    lines.append("%s; %s; JAX %s." % (device, note, jax.__version__))
    lines.append("")
    lines += ["- %s %s (%.2f)" % ("PASS" if ok else "FAIL", label, value)
              for label, ok, value in checks]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--child-no-command-buffers", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--frame-decode", action="store_true",
                        help="only the host cost of reading a call frame (no GPU needed)")
    parser.add_argument("--handler-call", action="store_true",
                        help="only the host cost of a handler call on a frame built in "
                             "memory, with stub driver and XLA functions (no GPU needed)")
    args = parser.parse_args()
    if args.frame_decode:
        print("frame decode: %.0f ns per call" % frame_decode_ns())
        return 0
    if args.handler_call:
        calls = handler_call_ns()
        for row, ns in (calls or {}).items():
            print("handler call %s: %.1f ns" % (row, ns))
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"handler_call_ns": calls}, f, indent=1)
        return 0
    if not any(d.platform == "gpu" for d in jax.devices()):
        print("JAX sees no GPU: nothing to measure")
        return 0
    if args.child_no_command_buffers:
        rows, _ = measure()
        print(json.dumps(rows))
        return 0
    print("command buffers: XLA's default")
    rows, note = measure()
    print("command buffers off (%s), in a child process" % NO_COMMAND_BUFFERS)
    for name, r in no_command_buffer_run().items():
        if name in rows:
            rows[name]["per chained call us, command buffers off"] = r["per chained call us"]
            rows[name]["one jit call us, command buffers off"] = r["one jit call us"]
    c_us = c_launch_us()
    print("C cuLaunchKernel loop, same kernel: %s us" % ("%.2f" % c_us if c_us else "n/a"))
    decode_ns = frame_decode_ns()
    calls_ns = handler_call_ns()
    print("frame decode (host, per call): %s ns" % decode_ns)
    print("handler call (host, stub driver, per call): %s ns" % calls_ns)
    a = rows["(a) jnp"]
    b = rows["(b) numba-cuda-launch cfunc handler"]
    c = rows["(c) ctypes Python handler + numba-cuda launch"]
    d = next((r for k, r in rows.items() if k.startswith("(d)")), None)
    chain = "per chained call us"
    checks = [
        ("one jit call within 5% of jnp", b["one jit call us"] <= 1.05 * a["one jit call us"],
         b["one jit call us"] / a["one jit call us"]),
        ("per chained call <= 2.7 us (command buffers on)", b[chain] <= 2.7, b[chain]),
        (">= 30x faster than the ctypes Python handler (chained)",
         c[chain] >= 30 * b[chain], c[chain] / b[chain]),
    ]
    if d is not None:
        checks.append((">= 30x faster than brainevent's bridge (chained)",
                       d[chain] >= 30 * b[chain], d[chain] / b[chain]))
        off = "per chained call us, command buffers off"
        if off in b and off in d:
            checks.append((">= 30x faster than brainevent's bridge (chained, command buffers "
                           "off)", d[off] >= 30 * b[off], d[off] / b[off]))
    if c_us:
        checks.append(("per chained call <= 1.2x raw C cuLaunchKernel", b[chain] <= 1.2 * c_us,
                       b[chain] / c_us))
    for label, ok, value in checks:
        print("%s %s (%.2f)" % ("PASS" if ok else "FAIL", label, value))
    device = "%s (%d visible)" % (jax.devices()[0].device_kind, len(jax.devices()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": device, "jax": jax.__version__, "brainevent": note,
                       "rows": rows, "c_launch_us": c_us, "frame_decode_ns": decode_ns,
                       "handler_call_ns": calls_ns,
                       "targets": checks}, f, indent=1)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(rows, c_us, checks, device, note)
                    + "\nHandler's host cost of reading a call frame: %s ns per call; "
                    "of a whole handler call (stub driver): %s ns.\n" % (decode_ns, calls_ns))
    return 0


if __name__ == "__main__":
    sys.exit(main())
