"""Launch cost from compiled code against C, numba-cuda, CuPy and ctypes.

Every row is measured in this one process, on one stream, launches back to
back, after a warm-up. For each batch the stream is idle first; the batch's
launches are timed (host time per launch: the launch cost, the table's
number), then the stream is synchronised (time per launch including the
GPU draining the batch: the throughput, kept in the JSON). Medians over
batches. Batches stay below the driver's launch-queue depth so that the
host never waits for the GPU while enqueuing.

    python benchmarks/launch_overhead.py [--json out.json] [--plot out.png]
"""

import argparse
import ctypes
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402
from numba.core import types as nt  # noqa: E402

import numba_cuda_launch as ncl  # noqa: E402

BATCH = 256
BATCHES = 40
HERE = os.path.dirname(os.path.abspath(__file__))
THROUGHPUT = {}  # (shape, row) -> us per launch including the drain


def median_us(run_batch, sync, batch=BATCH, batches=BATCHES, key=None):
    """Median host microseconds per launch of *run_batch(n)*."""
    run_batch(batch)  # warm-up (compiles, loads images)
    sync()
    enqueue, total = [], []
    for _ in range(batches):
        sync()
        t0 = time.perf_counter()
        run_batch(batch)
        t1 = time.perf_counter()
        sync()
        t2 = time.perf_counter()
        enqueue.append(t1 - t0)
        total.append(t2 - t0)
    if key is not None:
        THROUGHPUT[key] = float(np.median(total)) / batch * 1e6
    return float(np.median(enqueue)) / batch * 1e6


# -- kernels of each argument shape -----------------------------------------

def make_kernel(kind, count):
    """A trivial kernel and the argument types of its parameters."""
    if kind == "none":
        src = "def k():\n    pass\n"
        return cuda.jit(_exec(src)), ()
    if kind == "scalar3":
        src = ("def k(x, y, n):\n    i = cuda.grid(1)\n"
               "    if i < n:\n        x[i] = y[i] + 1\n")
        argtypes = (nt.CPointer(nt.float32), nt.CPointer(nt.float32), nt.int64)
        return cuda.jit(nt.void(*argtypes))(_exec(src)), argtypes
    names = ["a%d" % i for i in range(count)]
    src = ("def k(%s):\n    if cuda.grid(1) == 0:\n        a0[0, 0, 0] = 1\n"
           % ", ".join(names)) if kind == "arrays3d" else (
        "def k(%s):\n    i = cuda.grid(1)\n    if i < a0.size:\n        a0[i] = 1\n"
        % ", ".join(names))
    ndim = 3 if kind == "arrays3d" else 1
    return cuda.jit(_exec(src)), (nt.Array(nt.float32, ndim, "C"),) * count


def _exec(src):
    ns = {"cuda": cuda}
    exec(src, ns)
    return ns["k"]


def njit_loop(kernel, argtypes):
    """@njit function launching *kernel* `iters` times on `stream`."""
    n = len(argtypes)
    if argtypes and isinstance(argtypes[0], nt.Array):
        ndim = argtypes[0].ndim
        shape = "(8, 8, 8)" if ndim == 3 else "(512,)"
        build = "    a = numba.carray(ncl.as_voidptr(p), %s, np.float32)\n" % shape
        call = ", ".join(["a"] * n)
    elif argtypes:
        build = "    x = ncl.as_voidptr(p)\n"
        call = "x, x, 512"
    else:
        build, call = "", ""
    src = ("def loop(p, stream, iters):\n%s"
           "    cfg = kernel[2, 256, stream]\n"
           "    for _ in range(iters):\n"
           "        cfg(%s)\n" % (build, call))
    ns = {"kernel": kernel, "numba": numba, "np": np, "ncl": ncl}
    exec(src, ns)
    return numba.njit(nogil=True)(ns["loop"])


def cfunc_once(kernel, argtypes):
    """@cfunc launching once: int32(void* dev_ptr, void* stream)."""
    n = len(argtypes)
    if argtypes and isinstance(argtypes[0], nt.Array):
        shape = "(8, 8, 8)" if argtypes[0].ndim == 3 else "(512,)"
        build = "    a = numba.carray(p, %s, np.float32)\n" % shape
        call = ", ".join(["a"] * n)
    elif argtypes:
        build, call = "", "p, p, 512"
    else:
        build, call = "", ""
    src = ("def once(p, stream):\n%s"
           "    return kernel[2, 256, stream].launch_status(%s)\n" % (build, call))
    ns = {"kernel": kernel, "numba": numba, "np": np}
    exec(src, ns)
    return numba.cfunc(nt.int32(nt.voidptr, nt.voidptr))(ns["once"])


def cfunc_caller(once):
    """@njit loop calling the cfunc through its C address, as C code would."""
    ns = {"f": once.ctypes, "ncl": ncl}
    exec("def call(p, s, iters):\n"
         "    for _ in range(iters):\n"
         "        f(ncl.as_voidptr(p), ncl.as_voidptr(s))\n", ns)
    return numba.njit(nogil=True)(ns["call"])


def flat_param_values(handle, dev_ptr):
    """The kernel parameter values for launching *handle* from C on the
    arrays (or pointers) the compiled rows use, all at *dev_ptr*."""
    values = []
    for p, ty in zip(_per_param_types(handle), handle.params):
        field = ty.name.rsplit(".", 1)[-1]
        if not isinstance(p, nt.Array):
            values.append(dev_ptr if isinstance(p, nt.CPointer) else 512)
            continue
        shape = (8, 8, 8) if p.ndim == 3 else (512,)
        strides = np.empty(shape, np.float32).strides
        index = int(field[-2]) if field.endswith("]") else None
        values.append({
            "meminfo": 0, "parent": 0, "nitems": int(np.prod(shape)), "itemsize": 4,
            "data": dev_ptr,
        }.get(field) if index is None else (shape if field.startswith("shape") else strides)[index])
    return values


def _per_param_types(handle):
    """The argument type each flattened parameter belongs to."""
    from numba_cuda_launch.kernels import flat_param_names

    out = []
    for i, ty in enumerate(handle.argtypes):
        out += [ty] * len(flat_param_names("a%d" % i, ty))
    return out


def build_c_baseline(tmp):
    for cc in ("cc", "gcc", "clang"):
        if shutil.which(cc):
            out = os.path.join(tmp, "launch_c.so")
            subprocess.run([cc, "-O2", "-shared", "-fPIC", os.path.join(HERE, "launch_c.c"),
                            "-o", out], check=True)
            lib = ctypes.CDLL(out)
            lib.bench_launch.restype = ctypes.c_double
            lib.bench_launch.argtypes = [ctypes.c_void_p] * 4 + [
                ctypes.c_uint, ctypes.c_uint, ctypes.c_int64, ctypes.POINTER(ctypes.c_int)]
            return lib
    return None


SHAPES = [("none", 0, "no arguments"), ("scalar3", 3, "3 pointer/scalar args"),
          ("arrays1d", 1, "1 array 1-D"), ("arrays1d", 4, "4 arrays 1-D"),
          ("arrays1d", 16, "16 arrays 1-D"), ("arrays3d", 1, "1 array 3-D"),
          ("arrays3d", 4, "4 arrays 3-D"), ("arrays3d", 16, "16 arrays 3-D")]


def run(args):
    libcuda = ctypes.CDLL("libcuda.so.1")
    c_launch = ctypes.cast(libcuda.cuLaunchKernel, ctypes.c_void_p).value
    libcuda.cuLaunchKernel.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [
        ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    tmp = tempfile.mkdtemp()
    clib = build_c_baseline(tmp)
    stream = cuda.stream()
    raw = int(stream.handle)
    dev = cuda.device_array(4096, np.float32)
    dptr = dev.__cuda_array_interface__["data"][0]
    dev3 = dev[:512].reshape(8, 8, 8)
    try:
        import cupy
    except Exception:  # not installed, or no matching CUDA
        cupy = None

    rows = []
    sync = stream.synchronize
    for kind, count, label in SHAPES:
        kernel, argtypes = make_kernel(kind, count)
        row = {"shape": label}

        def measure(name, run_batch, batch=BATCH):
            row[name] = median_us(run_batch, sync, batch=batch, key=(label, name))

        loop = njit_loop(kernel, argtypes)
        measure("this project: @njit loop", lambda n: loop(dptr, raw, n))
        call_cfunc = cfunc_caller(cfunc_once(kernel, argtypes))
        measure("this project: @cfunc per launch", lambda n: call_cfunc(dptr, raw, n))

        handle = ncl.kernel_handle(kernel, argtypes)
        values = flat_param_values(handle, dptr)
        storage = [(ctypes.c_uint64 if p.size == 8 else ctypes.c_uint32)(v)
                   for p, v in zip(handle.params, values)]
        params = (ctypes.c_void_p * max(1, len(storage)))(*[ctypes.addressof(s) for s in storage])
        kh = handle.handle
        if clib is not None:
            status = ctypes.c_int()

            def c_batch(n):
                clib.bench_launch(c_launch, kh, raw, params, 2, 256, n, ctypes.byref(status))
                assert status.value == 0
            measure("C cuLaunchKernel loop", c_batch)

        def ctypes_batch(n):
            for _ in range(n):
                libcuda.cuLaunchKernel(kh, 2, 1, 1, 256, 1, 1, 0, raw, params, None)
        measure("Python ctypes cuLaunchKernel", ctypes_batch)

        if kind == "none":
            py_args = ()
        elif kind == "scalar3":
            py_args = None  # pointer arguments have no Python launch form
        else:
            py_args = (dev[:512] if kind == "arrays1d" else dev3,) * count
        if py_args is not None:
            cfg = kernel[2, 256, stream]

            def nc_batch(n):
                for _ in range(n):
                    cfg(*py_args)
            measure("numba-cuda Python launch", nc_batch, batch=BATCH // 4)
        if cupy is not None and kind in ("none", "scalar3"):
            src = ('extern "C" __global__ void k(float* x, const float* y, long long n)'
                   '{ long long i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = y[i] + 1; }'
                   if kind == "scalar3" else 'extern "C" __global__ void k() {}')
            rk = cupy.RawKernel(src, "k")
            cx = cupy.zeros(512, cupy.float32)
            cargs = (cx, cx, cupy.int64(512)) if kind == "scalar3" else ()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                cs = cupy.cuda.ExternalStream(raw)

            def cupy_batch(n):
                with cs:
                    for _ in range(n):
                        rk((2,), (256,), cargs)
            measure("CuPy RawKernel", cupy_batch)
        rows.append(row)
        print(format_row(row), flush=True)
    return rows


def format_row(row):
    base = row.get("C cuLaunchKernel loop")
    cells = []
    for key, value in row.items():
        if key == "shape":
            continue
        ratio = " (%.2fx C)" % (value / base) if base else ""
        cells.append("%s %.2f us%s" % (key, value, ratio))
    return "%-22s | %s" % (row["shape"], " | ".join(cells))


def compile_cost():
    src = ("def k(x):\n    i = cuda.grid(1)\n    if i < x.size:\n        x[i] = x[i] * 2 + 1\n")
    dev = cuda.device_array(512, np.float32)
    k_py = cuda.jit(_exec(src))
    t0 = time.perf_counter()
    k_py[2, 256](dev)
    cuda.synchronize()
    python_first = time.perf_counter() - t0

    k_fresh = cuda.jit(_exec(src))
    loop = njit_loop(k_fresh, (nt.Array(nt.float32, 1, "C"),))
    t0 = time.perf_counter()
    loop.compile((nt.int64, nt.int64, nt.int64))
    njit_with_kernel = time.perf_counter() - t0
    overloads_before = len(k_fresh.overloads)
    k_fresh[2, 256](dev)  # must not compile the kernel again
    cuda.synchronize()
    recompiled = len(k_fresh.overloads) != overloads_before

    loop2 = njit_loop(k_py, (nt.Array(nt.float32, 1, "C"),))
    t0 = time.perf_counter()
    loop2.compile((nt.int64, nt.int64, nt.int64))
    njit_added = time.perf_counter() - t0
    return {"python first launch (compile+load+launch) s": python_first,
            "njit launcher compile incl. kernel compile s": njit_with_kernel,
            "njit launcher compile, kernel already compiled s": njit_added,
            "kernel compiled twice": recompiled}


def memory_check(launches):
    src = "def k(x):\n    pass\n"
    kernel = cuda.jit(_exec(src))
    loop = njit_loop(kernel, (nt.Array(nt.float32, 1, "C"),))
    stream = cuda.stream()
    dev = cuda.device_array(4096, np.float32)
    dptr = dev.__cuda_array_interface__["data"][0]
    loop(dptr, int(stream.handle), 1000)
    stream.synchronize()

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    ctx = cuda.current_context()
    free0, rss0 = ctx.get_memory_info()[0], rss()
    t0 = time.perf_counter()
    for _ in range(launches // 100_000):
        loop(dptr, int(stream.handle), 100_000)
        stream.synchronize()
    elapsed = time.perf_counter() - t0
    free1, rss1 = ctx.get_memory_info()[0], rss()
    return {"launches": launches, "seconds": elapsed,
            "host RSS change bytes": rss1 - rss0, "device free change bytes": free0 - free1}


def targets(rows):
    out = []
    by_shape = {r["shape"]: r for r in rows}
    for label in ("no arguments", "3 pointer/scalar args"):
        r = by_shape[label]
        if "C cuLaunchKernel loop" in r:
            ratio = r["this project: @njit loop"] / r["C cuLaunchKernel loop"]
            out.append(("<= 1.05x C (%s)" % label, ratio <= 1.05, ratio))
    r = by_shape["16 arrays 3-D"]
    if "C cuLaunchKernel loop" in r:
        ratio = r["this project: @njit loop"] / r["C cuLaunchKernel loop"]
        out.append(("<= 1.15x C (16 arrays 3-D)", ratio <= 1.15, ratio))
    for label, r in by_shape.items():
        if "array" in label and "numba-cuda Python launch" in r:
            speedup = r["numba-cuda Python launch"] / r["this project: @njit loop"]
            out.append((">= 6x faster than numba-cuda (%s)" % label, speedup >= 6, speedup))
    return out


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    keys = [k for k in rows[0] if k != "shape"]
    for r in rows:
        keys += [k for k in r if k not in keys and k != "shape"]
    fig, ax = plt.subplots(figsize=(13, 5.5))
    width = 0.8 / len(keys)
    for i, key in enumerate(keys):
        xs = [j + i * width for j, r in enumerate(rows) if key in r]
        ys = [r[key] for r in rows if key in r]
        ax.bar(xs, ys, width, label=key)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(rows))])
    ax.set_xticklabels([r["shape"] for r in rows], rotation=20)
    ax.set_yscale("log")
    ax.set_ylabel("microseconds per launch (log)")
    ax.set_title("Kernel launch cost, %s" % cuda.get_current_device().name)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json")
    parser.add_argument("--plot")
    parser.add_argument("--launches", type=int, default=1_000_000)
    args = parser.parse_args()
    if not cuda.is_available():
        print("no CUDA GPU: nothing to measure")
        return 0
    dev = cuda.get_current_device()
    info = {"device": str(dev.name), "python": platform.python_version(),
            "numba": numba.__version__, "numba_cuda_launch": ncl.__version__}
    try:
        from importlib.metadata import version
        info["numba-cuda"] = version("numba-cuda")
    except Exception:
        pass
    print(info)
    rows = run(args)
    checks = targets(rows)
    for name, ok, value in checks:
        print("%s %s (%.2f)" % ("PASS" if ok else "FAIL", name, value))
    cost = compile_cost()
    print("compile cost:", cost)
    mem = memory_check(args.launches)
    print("memory:", mem)
    if args.json:
        with open(args.json, "w") as f:
            throughput = [{"shape": shape, "row": name, "us_per_launch_incl_drain": us}
                          for (shape, name), us in THROUGHPUT.items()]
            json.dump({"info": info, "rows": rows, "throughput": throughput,
                       "targets": checks, "compile": cost,
                       "memory": mem}, f, indent=1)
    if args.plot:
        plot(rows, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
