"""What importing the package changes (nothing but CPU-target typing), the
generated code, and cache=True across processes."""

import json
import os
import re
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

import numba_cuda_launch as ncl
from support.childenv import PREAMBLE, child_env  # noqa: F401

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_python(code, cwd=None, path_first=None):
    """Run *code* in a child process (*path_first* leading its PYTHONPATH)."""
    env = child_env()
    if path_first is not None:
        env["PYTHONPATH"] = str(path_first) + os.pathsep + env["PYTHONPATH"]
    out = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(code)], cwd=cwd,
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout


PTX_PROGRAM = """
    import hashlib, sys
    import numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    if sys.argv[-1] == "import":
        import numba_cuda_launch
    from numba import cuda
    from numba.core import types

    def kern(x, y):
        i = cuda.grid(1)
        if i < x.size:
            y[i] = x[i] * 2 + 1

    sig = (types.float32[::1], types.float32[::1])
    ptx, _ = cuda.compile_ptx(kern, sig, cc=(9, 0))
    print(hashlib.sha256(ptx.encode()).hexdigest())
    disp = cuda.jit(kern)
    print(type(disp[4, 32]).__name__, type(disp[4, 32, 0, 16]).__name__)
"""


@pytest.mark.slow
def test_import_changes_nothing_for_cuda_code():
    def run(flag):
        code = PTX_PROGRAM + "\n"
        out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), flag],
                             env=child_env(), capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split("\n")

    without, with_pkg = run("plain"), run("import")
    assert without[0] == with_pkg[0]  # same PTX for device code
    assert without[1] == with_pkg[1] == "_LaunchConfiguration _LaunchConfiguration"


SIGNATURE_PROGRAM = """
    import hashlib, json, re, sys
    import numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    if sys.argv[-1] == "import":
        import numba_cuda_launch
    from numba import cuda
    from numba.core import types
    # numba-cuda evaluates signature strings in this module's namespace
    # (numba.cuda.core.sigutils): Numba's types and numba-cuda's own.
    import numba.cuda.types as namespace

    simulated = bool(cuda.config.ENABLE_CUDASIM)

    def kern(x):
        pass

    def outcome(make):
        try:
            return "ok " + make()
        except Exception as exc:  # addresses differ between processes
            # The package's one change: with no GPU, numba-cuda's error about
            # the missing driver gains a hint on compiling without one.
            text = str(exc).split("\\n(no usable GPU: to compile kernels without one")[0]
            return "%s: %s" % (type(exc).__name__, re.sub("0x[0-9a-fA-F]+", "0x", text))

    names = sorted(n for n, v in vars(namespace).items() if isinstance(v, types.Type))
    results, ptx = {}, {}
    for name in names:
        for form in ("%s", "%s[:]"):
            sig = "void(%s)" % (form % name)
            row = [outcome(lambda: type(cuda.jit(sig)(kern)).__name__)]
            if simulated:  # where the package wraps cuda.jit: every way to declare
                row += [outcome(lambda: type(cuda.jit(sig, device=True)(kern)).__name__),
                        outcome(lambda: type(cuda.jit([sig])(kern)).__name__)]
            else:  # and the code, once per type (many names are aliases)
                key = (form, vars(namespace)[name])
                if key not in ptx:
                    ptx[key] = outcome(lambda: hashlib.sha256(
                        cuda.compile_ptx(kern, sig, cc=(9, 0))[0].encode()).hexdigest())
                row.append(ptx[key])
            results[sig] = row
    print(json.dumps({"names": names, "core": sorted(vars(types)), "results": results}))
"""


def run_with_and_without(program, **env):
    """*program*'s stdout, run without and with the package imported (the
    last argument says which), side by side."""
    env = child_env(**env)
    env.pop("NUMBA_CUDA_LAUNCH_CC", None)  # no compilation without a GPU in either
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(program), flag], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for flag in ("plain", "import")]
    outs = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr
        outs.append(stdout)
    return outs


@pytest.mark.slow
@pytest.mark.parametrize("simulator", ["0", "1"], ids=["cuda", "simulator"])
def test_signature_strings_with_every_type_name(simulator):
    # Every type name usable in a cuda.jit signature string, as a scalar and
    # as an array: declaring a kernel (under the simulator also a device
    # function and a list of signatures) and, without the simulator, the PTX
    # of each type end exactly as without the package.
    without, with_pkg = (json.loads(out.splitlines()[-1]) for out in
                         run_with_and_without(SIGNATURE_PROGRAM, NUMBA_ENABLE_CUDASIM=simulator))
    assert without["names"] == with_pkg["names"]
    cuda_only = set(without["names"]) - set(without["core"])
    assert cuda_only, "numba-cuda's own type names (bfloat16, ...) were not found"
    assert len(without["results"]) == 2 * len(without["names"])
    changed = {sig: (row, with_pkg["results"][sig]) for sig, row in without["results"].items()
               if with_pkg["results"][sig] != row}
    assert not changed, changed
    if simulator == "1":  # the simulator accepts every signature
        assert all(r == "ok FakeCUDAKernel" for row in without["results"].values() for r in row)


SIMULATED_SIGNATURES = """
    import numba, numpy as np
    if not hasattr(np, "row_stack"):
        np.row_stack = np.vstack
    import numba_cuda_launch
    from numba import cuda
    from numba.cuda.core import sigutils
    import numba.cuda.types as namespace

    def expected_error(sig):  # what cuda.jit(sig) raises on a GPU
        try:
            sigutils.normalize_signature(sig)
        except Exception as exc:
            return str(exc)

    @cuda.jit("void(nonsense)")
    def unknown_name(x):
        x[0] = 1

    @cuda.jit("void(bfloat16[:])")
    def bf16(x):
        pass

    @numba.njit
    def launch_unknown(a):
        unknown_name[1, 1](a)

    @numba.njit
    def launch_bf16(a):
        bf16[1, 1](a)

    for launch, expected in ((launch_unknown, expected_error("void(nonsense)")),
                             (launch_bf16, str(namespace.bfloat16[:]))):
        try:
            launch(np.zeros(4, np.float32))
        except numba.core.errors.TypingError as exc:
            message = str(exc)
            print(launch.__name__, expected in message, message.splitlines()[0])
        else:
            print(launch.__name__, "launched")
"""


@pytest.mark.slow
def test_simulator_kernels_keep_numba_cuda_signatures():
    # A signature naming numba-cuda's types is recorded as numba-cuda reads
    # it (the launch is refused for its bfloat16 parameter, not for a name
    # it did not know); one numba-cuda refuses leaves the decorator working,
    # as the simulator does, and refuses launches from compiled code with
    # numba-cuda's error.
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(SIMULATED_SIGNATURES)],
                         env=child_env(NUMBA_ENABLE_CUDASIM="1"), capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    unknown, bf16 = lines[-2].split(" ", 2), lines[-1].split(" ", 2)
    assert unknown[:2] == ["launch_unknown", "True"], lines
    assert "'unknown_name' cannot be launched from compiled code" in unknown[2]
    assert bf16[:2] == ["launch_bf16", "True"], lines
    assert "'bf16' parameter 'x'" in bf16[2]


@cuda.jit
def ir_kernel(x, n):
    pass


@njit
def ir_launch(p, n, stream):
    x = numba.carray(ncl.as_voidptr(p), (n,), np.float32)
    return ir_kernel[(n + 255) // 256, 256, stream].launch_status(x, n)


def test_generated_ir_is_a_direct_driver_call():
    ir_launch(0x10, 4, 0)
    (ir,) = ir_launch.inspect_llvm().values()
    body = ir[ir.index("define"):]
    assert "numba_cuda_launch_driver_table" in body
    assert "numba_cuda_launch_image_" in body and "numba_cuda_launch_slot_" in body
    # No Python, GIL or heap allocation on the launch path.
    for forbidden in ("PyGILState", "NRT_MemInfo_alloc", "malloc", "PyObject"):
        assert forbidden not in body.split("define")[1], forbidden
    asm = list(ir_launch.inspect_asm().values())[0]
    assert "load atomic" not in asm  # (sanity: this is machine code)


def _attributes(ir, symbol):
    """The attributes of function *symbol* defined in LLVM module text *ir*."""
    define = re.search(r"^define [^\n]*@%s\([^\n]*?\)[^#\n]* (#\d+)" % symbol, ir, re.M)
    assert define, "%s is not defined in the launch site's module" % symbol
    group = re.search(r"^attributes %s = \{ ([^}]*) \}" % define.group(1), ir, re.M)
    return group.group(1).split()


def test_runtime_is_optimised_only_where_it_runs_often():
    # Every library that launches links the package's runtime: the work run
    # once per load is left unoptimised (LLVM's O3 over it again in every
    # jax_kernel handler cost more than the handler's own body), the
    # graph-device lookup every graph launch makes is optimised.
    ir_launch(0x10, 4, 0)
    (ir,) = ir_launch.inspect_llvm().values()
    for symbol in ("numba_cuda_launch_load_kernel", "numba_cuda_launch_ensure_context"):
        attributes = _attributes(ir, symbol)
        assert "optnone" in attributes and "noinline" in attributes, (symbol, attributes)
    attributes = _attributes(ir, "numba_cuda_launch_graph_device_of")
    assert "optnone" not in attributes and "noinline" in attributes, attributes


CACHE_MODULE = """
import numba, numpy as np
if not hasattr(np, "row_stack"):  # numba-cuda 0.30.4 with numpy 2.5
    np.row_stack = np.vstack
from numba import cuda
import numba_cuda_launch as ncl
if not cuda.is_available():
    ncl.set_compute_capability((9, 0))

@cuda.jit
def k(x):
    x[0] = 1

@numba.njit(cache=True)
def go(p):
    x = numba.carray(ncl.as_voidptr(p), (4,), np.float32)
    return k[1, 1].launch_status(x)
"""


# Launches CACHE_MODULE's function once; prints its status, the launches
# recorded, the cache hits and the package imported.
CACHE_PROBE = """
    import numba_cuda_launch, cached_launch as m
    from numba_cuda_launch.testing import RecordingDriver
    with RecordingDriver() as fake:
        status = m.go(16)
    print(status, len(fake.launches), sum(m.go.stats.cache_hits.values()),
          numba_cuda_launch.__file__)
"""


@pytest.mark.slow
def test_cache_true_across_processes(tmp_path):
    (tmp_path / "cached_launch.py").write_text(CACHE_MODULE)
    first = run_python(CACHE_PROBE, cwd=tmp_path).split()[:3]
    second = run_python(CACHE_PROBE, cwd=tmp_path).split()[:3]
    assert first == ["0", "1", "0"]
    assert second == ["0", "1", "1"]  # loaded from the cache, launched again


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NCL_TEST_PATCHED") in ("1", "mlir"),
                    reason="the package is part of the patched numba-cuda there; a copy of it "
                           "alone does not import")
def test_cached_launch_code_of_another_build_of_the_package_is_not_used(tmp_path):
    import shutil

    package = os.path.dirname(ncl.__file__)
    copy = tmp_path / "site" / "numba_cuda_launch"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "cached_launch.py").write_text(CACHE_MODULE)

    def run():
        out = run_python(CACHE_PROBE, cwd=tmp_path, path_first=tmp_path / "site")
        status, launches, hits, where = out.split()
        assert where.startswith(str(copy))  # the copy is the package imported
        return status, launches, hits

    assert run() == ("0", "1", "0")
    assert run() == ("0", "1", "1")  # the same build: from the cache
    with open(copy / "launch" / "call.py", "a") as f:
        f.write("\n# another build\n")
    assert run() == ("0", "1", "0")  # compiled again, not loaded
    assert run() == ("0", "1", "1")


def test_build_check_refuses_code_of_another_build(tmp_path):
    from numba_cuda_launch.compat.numba_caching import LaunchTargetChanged
    from numba_cuda_launch.launch.caching import BuildCheck, package_build, sources_digest

    BuildCheck(package_build())()
    with pytest.raises(LaunchTargetChanged, match="another build of numba-cuda-launch"):
        BuildCheck("0" * 20)()
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "notes.txt").write_text("not source")
    first = sources_digest(tmp_path)
    (tmp_path / "notes.txt").write_text("still not source")
    assert sources_digest(tmp_path) == first
    (tmp_path / "a.py").write_text("x = 2\n")
    edited = sources_digest(tmp_path)
    assert edited != first
    (tmp_path / "a.py").rename(tmp_path / "b.py")
    assert sources_digest(tmp_path) not in (first, edited)
