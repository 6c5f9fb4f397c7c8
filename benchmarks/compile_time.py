"""Compile time of launch code, cold and from the on-disk caches: CPU seconds,
in fresh processes (medians), of

* the first ``@njit`` launch site of a process (compiled), and the first call
  of an ``@njit(cache=True)`` launch site loaded from Numba's cache, beside the
  first call of a plain cached ``@njit`` function loaded the same way;
* registering ``jax_kernel`` handlers (saxpy: two float32 arrays in, one out,
  a float32 scalar), per variant (grid and block from a Python launch rule,
  batch-aware with an ``@njit`` rule, dependent launch): with an empty cache
  directory (everything compiled), with the package's frame readers already
  in Numba's cache (the handler's own body compiled), and loaded from the
  handler cache; each for the first handler of a process and for another
  signature (float64) after it; and a float64 handler first in a process
  whose cache holds the body a float32 one compiled (one body per layout).

Each child process compiles its kernels and a first unrelated ``@njit``
function before the timed part, so Numba's own first-compile costs and the
kernel's compilation are out of the figures; with no GPU, images are built
for sm_90 and launches go to the recording driver. Every child gets its own
``NUMBA_CACHE_DIR``. docs/benchmarks.md, "The first call".

    python benchmarks/compile_time.py [--runs 3] [--json out.json] [--only site|jax]
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

_CHILD = r'''
import sys, time
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
import numba
from numba import cuda
import numba_cuda_launch as ncl
if not cuda.is_available():
    ncl.set_compute_capability((9, 0))

@cuda.jit
def saxpy(x, y, out, a):  # batch-aware: 1-D, or 2-D with a leading batch
    if x.ndim == 1:
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a * x[i] + y[i]
    else:
        b, i = cuda.grid(2)
        if b < x.shape[0] and i < x.shape[1]:
            out[b, i] = a * x[b, i] + y[b, i]

@numba.njit
def warm(x):
    return x + 1
warm(1)

what = sys.argv[1]
if what in ("site", "site-cached", "plain-cached"):
    arr = numba.types.float32[::1]
    saxpy.compile((arr, arr, arr, numba.types.float32))
    if what != "site":
        sys.path.insert(0, sys.argv[2])
        import cached_sites
        cached_sites.saxpy.compile((arr, arr, arr, numba.types.float32))
    t = time.process_time()
    if what == "site":
        @numba.njit
        def site(px, py, po, n, stream):
            x = numba.carray(ncl.as_voidptr(px), (n,), np.float32)
            y = numba.carray(ncl.as_voidptr(py), (n,), np.float32)
            o = numba.carray(ncl.as_voidptr(po), (n,), np.float32)
            saxpy[(n + 255) // 256, 256, stream](x, y, o, np.float32(2.0))
        site.compile((numba.types.int64,) * 5)
    else:
        from numba_cuda_launch.testing import RecordingDriver
        with RecordingDriver():
            if what == "site-cached":
                cached_sites.site(0x1000, 0x2000, 0x3000, 1000, 0)
                fn = cached_sites.site
            else:
                cached_sites.plain(3)
                fn = cached_sites.plain
    print(time.process_time() - t, sum(fn.stats.cache_hits.values()) if what != "site" else 0)
else:
    import jax
    from numba_cuda_launch.jax import jax_kernel
    variant, dtypes = sys.argv[2], sys.argv[3].split(",")

    @numba.njit
    def rule(xs, ys, a):
        return (xs[-1] + 255) // 256, 256

    options = dict(scalars={"a": np.float32}, cache=sys.argv[4:] != ["nocache"])
    if variant == "batch-aware":
        options.update(vmap_method="expand_dims")
    elif variant == "dependent":
        options.update(dependent=True)
    k = jax_kernel(saxpy, lambda x, y, a: x,
                   rule if variant == "batch-aware" else
                   (lambda x, y, a: ((x.shape[0] + 255) // 256, 256)), **options)
    for name in dtypes:
        for ndim in (1, 2) if variant == "batch-aware" else (1,):
            arr = numba.types.Array(numba.from_dtype(np.dtype(name)), ndim, "C")
            saxpy.compile((arr, arr, arr, numba.types.float32))
    times = []
    for name in dtypes:
        spec = jax.ShapeDtypeStruct((1024,), np.dtype(name))
        t = time.process_time()
        k.register(spec, spec, a=2.0)
        times.append(time.process_time() - t)
        times.append(k.handler([spec, spec], [spec]).cache_hits)
    print(*times)
'''

_CACHED_SITES = '''
import numba
import numpy as np
from numba import cuda
import numba_cuda_launch as ncl


@cuda.jit
def saxpy(x, y, out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


@numba.njit(cache=True)
def site(px, py, po, n, stream):
    x = numba.carray(ncl.as_voidptr(px), (n,), np.float32)
    y = numba.carray(ncl.as_voidptr(py), (n,), np.float32)
    o = numba.carray(ncl.as_voidptr(po), (n,), np.float32)
    return saxpy[(n + 255) // 256, 256, stream].launch_status(x, y, o, np.float32(2.0))


@numba.njit(cache=True)
def plain(x):
    return 2 * x + 1
'''

VARIANTS = ("python rule", "batch-aware", "dependent")
_VARIANT_ARG = {"python rule": "plain", "batch-aware": "batch-aware", "dependent": "dependent"}


def _run(args, cache_dir, sites_dir=None):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""),
               JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", ""), NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _CHILD] + args, env=env, capture_output=True,
                         text=True, timeout=600, cwd=sites_dir or root)
    if out.returncode != 0:
        raise RuntimeError("%s: %s" % (" ".join(args), out.stderr[-2000:]))
    return [float(v) for v in out.stdout.split()]


def _site_rows(runs):
    """``{row: [seconds per run]}`` of the launch-site rows."""
    rows = {"first @njit launch site, compiled": [],
            "first call of an @njit(cache=True) launch site, from the cache": [],
            "first call of a plain @njit(cache=True) function, from the cache": []}
    keys = list(rows)
    for _ in range(runs):
        cache = tempfile.mkdtemp()
        rows[keys[0]].append(_run(["site"], cache)[0])
        shutil.rmtree(cache)
        for what, key in (("site-cached", keys[1]), ("plain-cached", keys[2])):
            sites, cache = tempfile.mkdtemp(), tempfile.mkdtemp()
            with open(os.path.join(sites, "cached_sites.py"), "w") as f:
                f.write(_CACHED_SITES)
            _run([what, sites], cache, sites)  # writes the cache
            seconds, hits = _run([what, sites], cache, sites)
            if hits != 1:
                raise RuntimeError("%s was not loaded from the cache" % what)
            rows[key].append(seconds)
            shutil.rmtree(sites)
            shutil.rmtree(cache)
    return rows


def _jax_rows(runs, variants):
    """``{row: [seconds per run]}`` of the jax_kernel rows, per variant."""
    rows = {}
    for variant in variants:
        arg = _VARIANT_ARG[variant]
        names = ["%s: %s" % (variant, what) for what in (
            "first handler, empty cache", "another signature, empty cache",
            "first handler, frame readers cached", "first handler, from the handler cache",
            "another signature, from the handler cache",
            "first handler of another dtype, its layout's body cached")]
        for name in names:
            rows[name] = []
        for _ in range(runs):
            cache = tempfile.mkdtemp()
            first, _, other, _ = _run(["jax", arg, "float32,float64"], cache)
            rows[names[0]].append(first)
            rows[names[1]].append(other)
            first, hits1, other, hits2 = _run(["jax", arg, "float32,float64"], cache)
            if (hits1, hits2) != (1, 1):
                raise RuntimeError("%s: handlers were not loaded from the cache" % variant)
            rows[names[3]].append(first)
            rows[names[4]].append(other)
            shutil.rmtree(cache)
            cache = tempfile.mkdtemp()
            # the shared code cached, the kernel's handlers not (cache=False)
            _run(["jax", arg, "float32", "nocache"], cache)
            first, hits = _run(["jax", arg, "float32"], cache)
            if hits != 0:
                raise RuntimeError("%s: the float32 handler was cached" % variant)
            rows[names[2]].append(first)
            # float64 first in a later process: the body float32's compiled
            first, hits = _run(["jax", arg, "float64"], cache)
            if hits != 1:
                raise RuntimeError("%s: the layout's body was not loaded" % variant)
            rows[names[5]].append(first)
            shutil.rmtree(cache)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--json")
    parser.add_argument("--only", choices=("site", "jax"))
    parser.add_argument("--variants", default=",".join(VARIANTS),
                        help="jax_kernel variants, comma-separated: %s" % ", ".join(VARIANTS))
    args = parser.parse_args()
    rows = {}
    if args.only != "jax":
        rows.update(_site_rows(args.runs))
    if args.only != "site":
        try:
            import jax  # noqa: F401
        except ImportError:
            print("jax_kernel rows: JAX is not installed, left out")
        else:
            rows.update(_jax_rows(args.runs, args.variants.split(",")))
    for label, times in rows.items():
        print("%-78s %.3f s (median of %d: %s)" % (label, statistics.median(times), len(times),
                                                   ", ".join("%.3f" % t for t in times)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows_s": {k: statistics.median(v) for k, v in rows.items()},
                       "runs_s": rows}, f, indent=1)


if __name__ == "__main__":
    main()
