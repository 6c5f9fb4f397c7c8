"""Generate patches/: the package as a patch series against numba-cuda.

    .venv/bin/python ci/make_patches.py            # all release lines in RELEASES
    .venv/bin/python ci/make_patches.py --check    # fail if patches/ is out of date

For each supported numba-cuda release line, the release's wheel is unpacked
(numba-cuda publishes no sdists after 0.24; its wheels carry the Python
sources at the same paths as the source tree, numba_cuda/numba/cuda/...),
and two commits are made on top of it and written with `git format-patch`:

1. add ``numba_cuda/numba/cuda/cpu_launch/``: this package's modules and
   subpackages, with
   ``numba_cuda_launch`` imports rewritten to ``numba.cuda.cpu_launch``;
2. import it at the end of ``numba/cuda/__init__.py``, so that
   ``kernel[...]`` works in @cfunc/@njit code with no extra import.

The package is the single source of truth: rerun this after changing it.
"""

import glob
import re
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASES = {"0.26": "0.26.0", "0.28": "0.28.2", "0.30": "0.30.4"}
TARGET = "numba_cuda/numba/cuda"
GIT_ENV = {
    "GIT_AUTHOR_NAME": "numba-cuda-launch", "GIT_AUTHOR_EMAIL": "numba-cuda-launch@users.noreply",
    "GIT_COMMITTER_NAME": "numba-cuda-launch",
    "GIT_COMMITTER_EMAIL": "numba-cuda-launch@users.noreply",
    "GIT_AUTHOR_DATE": "2026-11-30T00:00:00Z", "GIT_COMMITTER_DATE": "2026-11-30T00:00:00Z",
}
HOOK = (
    "\n# Launch @cuda.jit kernels from CPU nopython code (@cfunc, @njit):\n"
    "# kernel[griddim, blockdim, stream, sharedmem](args...) lowers to a direct\n"
    "# driver launch. See numba.cuda.cpu_launch.\n"
    "from numba.cuda import cpu_launch as _cpu_launch  # noqa: E402,F401\n"
)
MESSAGE_ADD = """cuda: launch kernels from CPU nopython code

Add numba.cuda.cpu_launch, which types and lowers
kernel[griddim, blockdim, stream, sharedmem](args...) in CPU nopython
functions (@cfunc, @njit): the launch configuration is a first-class value
and the call is a direct cuLaunchKernel through a driver table bound by
name, with the kernel image carried by the compiled function and loaded on
first launch (cuLibraryLoadData). Also: a status-returning form
(cfg.launch_status), kernel_handle() for C callers, XLA typed-FFI helpers
(cpu_launch.xla_ffi) and JAX integration (cpu_launch.jax).

Generated from numba-cuda-launch %(version)s by ci/make_patches.py.
"""
MESSAGE_HOOK = """cuda: enable cpu_launch on import

Import numba.cuda.cpu_launch at the end of numba.cuda's initialisation so
that CPU nopython code can launch kernels without importing anything else.
"""


def git(tree, *args, env=None):
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True,
                          env=dict(os.environ, **GIT_ENV, **(env or {}))).stdout


def download_wheel(version, dest):
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary", ":all:", "--python-version", "3.11",
                    "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
                    "--platform", "manylinux2014_x86_64", "numba-cuda==%s" % version, "-d", dest],
                   check=True)
    return glob.glob(os.path.join(dest, "numba_cuda-%s-*.whl" % version))[0]


def package_sources():
    """This package's modules with imports rewritten for numba.cuda."""
    out = {}
    package = os.path.join(ROOT, "numba_cuda_launch")
    for path in sorted(glob.glob(os.path.join(package, "**", "*.py"), recursive=True)):
        with open(path) as f:
            text = f.read()
        # Module references only: LLVM symbol names (numba_cuda_launch_*) stay,
        # so code compiled by either form finds the same driver table.
        out[os.path.relpath(path, package)] = re.sub(r"\bnumba_cuda_launch\b(?!_)",
                                             "numba.cuda.cpu_launch", text)
    return out


def make_series(line, version, workdir, out_root=None):
    from numba_cuda_launch import __version__

    wheel = download_wheel(version, workdir)
    tree = os.path.join(workdir, "tree-" + line)
    with zipfile.ZipFile(wheel) as z:
        z.extract(TARGET + "/__init__.py", tree)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "numba-cuda %s (from the release wheel)" % version)
    dest = os.path.join(tree, TARGET, "cpu_launch")
    os.makedirs(dest)
    for name, text in package_sources().items():
        os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
        with open(os.path.join(dest, name), "w") as f:
            f.write(text)
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", MESSAGE_ADD % {"version": __version__})
    with open(os.path.join(tree, TARGET, "__init__.py"), "a") as f:
        f.write(HOOK)
    git(tree, "commit", "-q", "-am", MESSAGE_HOOK)
    out = os.path.join(out_root or os.path.join(ROOT, "patches"), line)
    shutil.rmtree(out, ignore_errors=True)
    git(tree, "format-patch", "-q", "--no-signature", "--zero-commit", "HEAD~2", "-o", out)
    return sorted(os.listdir(out))


def main():
    sys.path.insert(0, ROOT)
    check = "--check" in sys.argv
    workdir = tempfile.mkdtemp(prefix="ncl-patches-")
    out_root = os.path.join(workdir, "patches") if check else None
    stale = []
    for line, version in RELEASES.items():
        names = make_series(line, version, workdir, out_root)
        print(line, version, names)
        if check:
            for name in names:
                with open(os.path.join(out_root, line, name)) as f:
                    fresh = f.read()
                committed = os.path.join(ROOT, "patches", line, name)
                if not os.path.exists(committed) or open(committed).read() != fresh:
                    stale.append(os.path.join(line, name))
    shutil.rmtree(workdir, ignore_errors=True)
    if stale:
        print("patches/ is out of date (run python ci/make_patches.py): %s" % ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
