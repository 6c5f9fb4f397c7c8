"""Does a ``lax.while_loop`` whose body calls a ``jax_kernel`` run inside one
CUDA graph on XLA:GPU, and what does each iteration cost?

XLA runs a while loop either as a WhileThunk (each iteration the predicate
is copied to the host, which then launches the body's thunks) or, when
command buffers take WHILE, as one command buffer whose loop is a CUDA
conditional WHILE node (the predicate stays on the GPU). A jax_kernel's FFI
handler is command-buffer compatible by default, so the body can be
captured. Measured here, in child processes for each XLA_FLAGS setting:

* whether the optimized HLO has the ``while`` inside a command-buffer
  computation (XLA's CommandBufferScheduling outlines them);
* microseconds per iteration of a jitted loop of ITERS iterations whose
  body is (k) a ``jax_kernel`` (out = 0.5 x + 1 on 1024 float32) or (j) the
  same in ``jnp``, against an unrolled chain of CHAIN calls.

    python benchmarks/jax_while.py [--json out.json]
"""

import argparse
import json
import os
import subprocess
import sys

from numba import cuda

ITERS = 1000
CHAIN = 100  # calls in the unrolled chain (compiling 1000 is slow)
SETTINGS = {
    "XLA defaults": "",
    "command buffers with WHILE": "--xla_gpu_enable_command_buffer=FUSION,CUSTOM_CALL,WHILE,"
                                  "CONDITIONAL --xla_gpu_graph_min_graph_size=1",
    "command buffers off": "--xla_gpu_enable_command_buffer=",
}


@cuda.jit
def affine(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 0.5 * x[i] + 1


def _dump_summary(folder):
    """What XLA's dump of the loop's compilation says of command buffers:
    {file: [lines naming a command buffer]}, the first few of each."""
    import re

    out = {}
    for name in sorted(os.listdir(folder)):
        try:
            with open(os.path.join(folder, name), errors="replace") as f:
                lines = [ln.strip()[:160] for ln in f
                         if re.search(r"command.?buffer", ln, re.I)]
        except (IsADirectoryError, OSError):
            continue
        if lines:
            out[name] = lines[:6] + (["... %d lines" % len(lines)] if len(lines) > 6 else [])
    return out


def child(flags):
    """Measure one XLA_FLAGS setting; prints one JSON line."""
    import tempfile

    dump = tempfile.mkdtemp(prefix="jax_while_dump_")
    flags += " --xla_dump_to=%s --xla_dump_hlo_as_text" % dump
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " " + flags).strip()
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import time

    import jax
    import jax.numpy as jnp
    import numpy as np

    from numba_cuda_launch.jax import jax_kernel

    step_k = jax_kernel(affine, out_shapes=lambda x: x,
                        launch=lambda x: ((x.shape[0] + 255) // 256, 256))

    def step_j(x):
        return 0.5 * x + 1

    def loop(step):
        @jax.jit
        def f(x):
            return jax.lax.while_loop(lambda c: c[0] < ITERS,
                                      lambda c: (c[0] + 1, step(c[1])), (0, x))[1]
        return f

    def chain(step):
        @jax.jit
        def f(x):
            for _ in range(CHAIN):
                x = step(x)
            return x
        return f

    def per_iteration_us(f, x, count, repeats=7):
        f(x).block_until_ready()
        best = float("inf")
        for _ in range(repeats):
            t0 = time.perf_counter()
            f(x).block_until_ready()
            best = min(best, time.perf_counter() - t0)
        return best / count * 1e6

    def while_in_command_buffer(f, x):
        text = f.lower(x).compile().as_text()
        comps, name = {}, None
        for line in text.splitlines():
            head = line.split(" ", 2)
            if line and not line.startswith(" ") and "{" in line and (
                    head[0] in ("ENTRY",) or head[0].startswith("%")):
                name = head[1] if head[0] == "ENTRY" else head[0]
                comps[name] = []
            elif name is not None:
                comps[name].append(line)
        buffers = [n for n in comps if "command_buffer" in n]
        inside = any(" while(" in line for n in buffers for line in comps[n])
        return dict(command_buffers=len(buffers), while_inside=inside)

    x = jnp.asarray(np.random.default_rng(0).standard_normal(1024).astype(np.float32))
    expected = np.asarray(x)
    for _ in range(ITERS):
        expected = np.float32(0.5) * expected + np.float32(1)
    out = {}
    for label, step in (("k", step_k), ("j", step_j)):
        f = loop(step)
        got = np.asarray(f(x))
        out[label] = dict(
            while_us=per_iteration_us(f, x, ITERS),
            chain_us=per_iteration_us(chain(step), x, CHAIN),
            correct=bool(np.allclose(got, expected, rtol=1e-5)), **while_in_command_buffer(f, x))
        if label == "k":
            out["hlo"] = "\n".join(
                line[:200] for line in f.lower(x).compile().as_text().splitlines()
                if any(w in line for w in ("while", "command_buffer", "custom-call", "ENTRY",
                                           "calls=", "body=")))[:6000]
    out["dump"] = _dump_summary(dump)
    out["jax"] = jax.__version__
    out["device"] = str(jax.devices()[0])
    print("RESULT " + json.dumps(out))


def main():
    if "--child" in sys.argv:
        child(sys.argv[sys.argv.index("--child") + 1])
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json")
    ap.add_argument("--hlo", action="store_true",
                    help="print what XLA's dump says of command buffers")
    ap.add_argument("--settings", default=",".join(SETTINGS),
                    help="comma-separated labels of the XLA_FLAGS settings to measure")
    args = ap.parse_args()
    results = {}
    for label in args.settings.split(","):
        flags = SETTINGS[label]
        done = subprocess.run([sys.executable, __file__, "--child", flags],
                              capture_output=True, text=True, timeout=300)
        line = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
        if not line:
            print("%s: failed\n%s" % (label, (done.stdout + done.stderr)[-2000:]))
            continue
        r = results[label] = json.loads(line[0][7:])
        if args.hlo:
            print(json.dumps(r["dump"], indent=1)[:4000])
        for key, name in (("k", "jax_kernel body"), ("j", "jnp body")):
            v = r[key]
            print("%-28s %-16s while %7.2f us/iter, unrolled chain %6.2f us/call; "
                  "%d command buffers, while inside one: %s; correct: %s" % (
                      label, name, v["while_us"], v["chain_us"], v["command_buffers"],
                      v["while_inside"], v["correct"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(iterations=ITERS, settings=SETTINGS, results=results), f, indent=1)


if __name__ == "__main__":
    main()
