"""Generate patches/: the package as a patch series against numba-cuda, and
one against numba-cuda-mlir (patches/numba-cuda-mlir/).

    .venv/bin/python ci/make_patches.py            # all release lines in RELEASES
    .venv/bin/python ci/make_patches.py --check    # fail if patches/ is out of date

One series serves every release line it is identical for: it is written to
patches/ (with patches/SERIES naming the releases it applies to); a line
whose series differs gets its own patches/<line>/. For each supported
numba-cuda release line, the release's wheel is unpacked
(numba-cuda publishes no sdists after 0.24; its wheels carry the Python
sources at the same paths as the source tree, numba_cuda/numba/cuda/...),
and three commits are made on top of it and written with `git format-patch`:

1. add ``numba_cuda/numba/cuda/cpu_launch/``: this package's modules and
   subpackages but ``interop/``, with
   ``numba_cuda_launch`` imports rewritten to ``numba.cuda.cpu_launch``;
2. add its ``interop/`` (XLA FFI, JAX, TVM-FFI, C libraries), so that no
   patch of the series is over 1 MiB (tests/test_repository.py);
3. import it at the end of ``numba/cuda/__init__.py``, so that
   ``kernel[...]`` works in @cfunc/@njit code with no extra import.

The numba-cuda-mlir series does the same against its release wheel
(``MLIR_RELEASE``): ``numba_cuda_mlir/cpu_launch/`` (imports rewritten to
``numba_cuda_mlir.cpu_launch``), imported at the end of
``numba_cuda_mlir/__init__.py`` where Numba is installed (numba-cuda-mlir
itself does not need Numba; launching from @cfunc/@njit code does).

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
MLIR_RELEASE = "0.6.0"
TARGET = "numba_cuda/numba/cuda"
MLIR_TARGET = "numba_cuda_mlir"
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
(cfg.launch_status) and kernel_handle() for C callers.

Generated from numba-cuda-launch %(version)s by ci/make_patches.py.
"""
MESSAGE_INTEROP = """%(prefix)s: launch from XLA FFI, JAX, TVM-FFI and C libraries

Add %(module)s.interop, what the public modules xla_ffi, jax,
tvm_ffi and aot are made of: XLA typed-FFI handlers and their call-frame
readers, jax_kernel, kernels as TVM-FFI functions, and C libraries of
launchers.

Generated from numba-cuda-launch %(version)s by ci/make_patches.py.
"""
MLIR_HOOK = (
    "\n# Launch @cuda.jit kernels from CPU nopython code (@cfunc, @njit) where\n"
    "# Numba is installed: kernel[griddim, blockdim, stream, sharedmem](args...)\n"
    "# lowers to a direct driver launch. See numba_cuda_mlir.cpu_launch.\n"
    "import importlib.util as _importlib_util  # noqa: E402\n"
    "if _importlib_util.find_spec(\"numba\") is not None:\n"
    "    from numba_cuda_mlir import cpu_launch as _cpu_launch  # noqa: F401\n"
)
MESSAGE_MLIR_ADD = """cpu_launch: launch kernels from CPU nopython code

Add numba_cuda_mlir.cpu_launch, which types and lowers
kernel[griddim, blockdim, stream, sharedmem](args...) of numba-cuda-mlir
kernels in Numba's CPU nopython functions (@cfunc, @njit) as a direct
driver launch, with the kernel's cubin carried by the compiled function,
and makes graphs.set_conditional and griddepcontrol_wait /
griddepcontrol_launch_dependents callable in kernels (extension registries).

Generated from numba-cuda-launch %(version)s by ci/make_patches.py.
"""
MESSAGE_MLIR_HOOK = """cpu_launch: enable on import where Numba is installed

Import numba_cuda_mlir.cpu_launch at the end of numba_cuda_mlir's
initialisation when Numba (the CPU target) is installed.
"""
MESSAGE_HOOK = """cuda: enable cpu_launch on import

Import numba.cuda.cpu_launch at the end of numba.cuda's initialisation so
that CPU nopython code can launch kernels without importing anything else.
"""


def git(tree, *args, env=None):
    return subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, text=True,
                          env=dict(os.environ, **GIT_ENV, **(env or {}))).stdout


def download_wheel(version, dest, distribution="numba-cuda"):
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps",
                    "--only-binary", ":all:", "--python-version", "3.11",
                    "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux_2_27_x86_64",
                    "--platform", "manylinux2014_x86_64", "%s==%s" % (distribution, version),
                    "-d", dest], check=True)
    return glob.glob(os.path.join(dest, "%s-%s-*.whl" % (distribution.replace("-", "_"),
                                                          version)))[0]


def package_sources(module="numba.cuda.cpu_launch"):
    """This package's modules with imports rewritten for *module*."""
    out = {}
    package = os.path.join(ROOT, "numba_cuda_launch")
    # modules and the C runtime of built libraries (package data)
    paths = [p for ext in ("py", "c") for p in
             glob.glob(os.path.join(package, "**", "*." + ext), recursive=True)]
    for path in sorted(paths):
        with open(path) as f:
            text = f.read()
        # Module references only: LLVM symbol names (numba_cuda_launch_*) stay,
        # so code compiled by either form finds the same driver table.
        out[os.path.relpath(path, package)] = re.sub(r"\bnumba_cuda_launch\b(?!_)",
                                                     module, text)
    return out


def make_series(line, version, workdir, distribution="numba-cuda", target=TARGET,
                module="numba.cuda.cpu_launch", messages=(MESSAGE_ADD, MESSAGE_HOOK),
                hook=HOOK, prefix="cuda"):
    """The series for *distribution* *version*: ``{file name: text}``."""
    from numba_cuda_launch import __version__

    wheel = download_wheel(version, workdir, distribution)
    tree = os.path.join(workdir, "tree-" + line)
    with zipfile.ZipFile(wheel) as z:
        z.extract(target + "/__init__.py", tree)
    git(tree, "init", "-q")
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "%s %s (from the release wheel)" % (distribution, version))
    dest = os.path.join(tree, target, "cpu_launch")
    os.makedirs(dest)
    sources = package_sources(module)
    for interop in (False, True):  # the package, then its interop/: two commits
        for name, text in sources.items():
            if name.startswith("interop" + os.sep) == interop:
                os.makedirs(os.path.dirname(os.path.join(dest, name)), exist_ok=True)
                with open(os.path.join(dest, name), "w") as f:
                    f.write(text)
        git(tree, "add", "-A")
        message = MESSAGE_INTEROP if interop else messages[0]
        git(tree, "commit", "-q", "-m", message % {"version": __version__, "module": module,
                                                    "prefix": prefix})
    with open(os.path.join(tree, target, "__init__.py"), "a") as f:
        f.write(hook)
    git(tree, "commit", "-q", "-am", messages[1])
    out = os.path.join(workdir, "series-" + line)
    git(tree, "format-patch", "-q", "--no-signature", "--zero-commit", "HEAD~3", "-o", out)
    series = {}
    for name in sorted(os.listdir(out)):
        with open(os.path.join(out, name)) as f:
            series[name] = f.read()
    return series


def layout(series):
    """``{path under patches/: text}`` for ``{line: series}``: the series
    most lines share at the top, each other line's in its own folder, and
    SERIES saying which releases each applies to."""
    groups = []  # [(series, [lines])]
    for line, s in series.items():
        for shared, lines in groups:
            if shared == s:
                lines.append(line)
                break
        else:
            groups.append((s, [line]))
    groups.sort(key=lambda g: -len(g[1]))
    files = {}
    note = ["# Generated by ci/make_patches.py: which numba-cuda releases each series applies to.",
            "# Apply with git apply (see ci/test_patches.sh)."]
    for i, (s, lines) in enumerate(groups):
        folder = "" if i == 0 else lines[0] + "/"
        for name, text in s.items():
            files[folder + name] = text
        note.append("%s: numba-cuda %s" % (folder or "./", ", ".join(RELEASES[x] for x in lines)))
    files["SERIES"] = "\n".join(note) + "\n"
    return files


def committed(root):
    """``{path under patches/: text}`` as committed."""
    out = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            with open(path) as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def main():
    sys.path.insert(0, ROOT)
    check = "--check" in sys.argv
    workdir = tempfile.mkdtemp(prefix="ncl-patches-")
    try:
        series = {line: make_series(line, version, workdir) for line, version in RELEASES.items()}
        mlir = make_series("mlir", MLIR_RELEASE, workdir, "numba-cuda-mlir", MLIR_TARGET,
                           "numba_cuda_mlir.cpu_launch", (MESSAGE_MLIR_ADD, MESSAGE_MLIR_HOOK),
                           MLIR_HOOK, "cpu_launch")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    fresh = layout(series)
    fresh.update({"numba-cuda-mlir/" + name: text for name, text in mlir.items()})
    fresh["SERIES"] += "numba-cuda-mlir/: numba-cuda-mlir %s\n" % MLIR_RELEASE
    print(fresh["SERIES"], end="")
    target = os.path.join(ROOT, "patches")
    if check:
        have = committed(target)
        stale = sorted(p for p in set(fresh) | set(have) if fresh.get(p) != have.get(p))
        if stale:
            print("patches/ is out of date (run python ci/make_patches.py): %s" % ", ".join(stale))
            return 1
        return 0
    shutil.rmtree(target, ignore_errors=True)
    for path, text in fresh.items():
        os.makedirs(os.path.dirname(os.path.join(target, path)), exist_ok=True)
        with open(os.path.join(target, path), "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
