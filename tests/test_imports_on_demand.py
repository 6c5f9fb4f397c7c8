"""What ``import numba_cuda_launch`` loads, and what it loads only when used
(docs/architecture.md, "Imports on demand"): each check runs in a fresh
child process, where nothing of the suite was imported before."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
from support.childenv import PREAMBLE, child_env

from numba_cuda_launch.compat.versions import has_numba_cuda, has_numba_cuda_mlir

#: the package's modules a bare import loads (names below the package); a
#: change here is a change of what every program pays at import
BARE_IMPORT = {
    "", "_version", "config", "errors",
    "compat", "compat.cuda_target", "compat.import_hooks", "compat.numba_caching",
    "compat.numba_cuda_mlir",
    "compat.numba_dispatcher", "compat.numba_extending", "compat.numba_float16",
    "compat.overrides", "compat.ptx", "compat.simulator", "compat.versions",
    "cudadrv", "cudadrv.bodies", "cudadrv.conditional", "cudadrv.driver", "cudadrv.events",
    "cudadrv.fatbin", "cudadrv.graph", "cudadrv.graphdevices", "cudadrv.image",
    "cudadrv.launch", "cudadrv.occupancy", "cudadrv.paraminfo",
    "kernels", "kernels.foreign", "kernels.installed", "kernels.numba_cuda_mlir",
    "launch", "launch.backends", "launch.backends.backend", "launch.backends.driver",
    "launch.caching", "launch.call", "launch.conditionalhandle", "launch.devicearray",
    "launch.devicearray.arraytype", "launch.devicearray.fastpaths",
    "launch.devicearray.producer_wait", "launch.devicearray.readers",
    "launch.devicearray.typeof", "launch.devicearray.unbox", "launch.halffloat",
    "launch.intrinsics", "launch.launchconfig", "launch.occupancy", "launch.plan",
    "launch.pointer", "launch.pyobjects", "launch.refusals", "launch.stream",
}
#: ... and once numba.cuda is imported (where numba-cuda is installed), its
#: kernel source
NUMBA_CUDA_MODULES = {"compat.numba_cuda", "kernels.numba_cuda"}

#: libraries a bare import never loads (each is loaded by the feature using
#: it; a kernel compiler by the user)
NEVER_AT_IMPORT = ("jax", "jaxlib", "tvm_ffi", "cffi", "torch", "cupy", "triton",
                   "cuda.core", "numba_cuda_mlir", "numba.cuda")


#: the compiler a patched build of the package lives in (tests/_patched),
#: imported with it; None for this package
HOST = {"1": "numba.cuda", "mlir": "numba_cuda_mlir"}.get(os.environ.get("NCL_TEST_PATCHED", ""))


def run_child(code, **env):
    out = subprocess.run([sys.executable, "-c", PREAMBLE + textwrap.dedent(code)],
                         capture_output=True, text=True, env=child_env(**env), timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


_LOADED = """
    import json, sys
    import numba
    %s
    before = set(sys.modules)
    import numba_cuda_launch as ncl
    %s
    prefix = ncl.set_compute_capability.__module__  # the package's own name
    print(json.dumps({
        "package": sorted(m[len(prefix):].lstrip(".") for m in sys.modules
                          if m == prefix or m.startswith(prefix + ".")),
        "added": sorted(set(sys.modules) - before)}))
"""


def test_a_bare_import_loads_the_launch_path_only():
    # (a patched build is imported with its compiler: what it adds to that)
    loaded = run_child(_LOADED % ("import " + HOST if HOST else "", ""))
    expected = BARE_IMPORT | (NUMBA_CUDA_MODULES if HOST == "numba.cuda" else set())
    package = set(loaded["package"])
    assert package == expected, ("loaded, not pinned: %s; pinned, not loaded: %s"
                                 % (sorted(package - expected), sorted(expected - package)))
    for library in set(NEVER_AT_IMPORT) - {HOST}:
        assert not [m for m in loaded["added"]
                    if m == library or m.startswith(library + ".")], library


@pytest.mark.parametrize("name, module", [
    ("graphs", "graphs"), ("event", "launch.events"), ("Event", "launch.events"),
    ("synchronize", "launch.sync"), ("stream_query_status", "launch.sync"),
    ("kernel_handle", "launch.handle"),
])
def test_each_name_loads_its_module_when_first_asked_for(name, module):
    seen = run_child("""
        import json, sys
        import numba_cuda_launch as ncl
        module = ncl.set_compute_capability.__module__ + ".%s"
        before = module in sys.modules
        value = getattr(ncl, "%s")
        print(json.dumps([before, module in sys.modules, "%s" in dir(ncl),
                          getattr(value, "__name__", None)]))
    """ % (module, name, name))
    assert seen == [False, True, True, name if name != "graphs" else seen[3]]
    if name == "graphs":
        assert seen[3].endswith(".graphs")


@pytest.mark.skipif(not has_numba_cuda(), reason="needs numba-cuda")
@pytest.mark.parametrize("before, after", [("import numba.cuda", ""),
                                           ("", "from numba import cuda")])
def test_numba_cuda_kernels_are_a_source_once_numba_cuda_is_imported(before, after):
    # either order: numba.cuda imported before the package, or after it
    loaded = run_child(_LOADED % (before, after + """
    from numba_cuda_launch.kernels import SOURCES
    assert "numba-cuda" in [s.name for s in SOURCES], SOURCES"""))
    assert set(loaded["package"]) == BARE_IMPORT | NUMBA_CUDA_MODULES


def test_an_unknown_name_is_an_attribute_error():
    import numba_cuda_launch as ncl

    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        ncl.no_such_name
    assert not hasattr(ncl, "jax_kernel")  # the interop modules are imported by name


@pytest.mark.skipif(not has_numba_cuda(), reason="needs numba-cuda (its recording streams)")
def test_names_first_used_inside_nopython_code_are_typed():
    # Nothing imports graphs, events or sync before Numba types these
    # functions: the package's __getattr__ runs while Numba types them.
    calls = run_child("""
        import json, sys
        import numba_cuda_launch as ncl
        from numba import njit
        from numba_cuda_launch.testing import RecordingDriver

        @njit
        def record(s):
            ncl.graphs.begin_capture(s)
            g = ncl.graphs.end_capture(s)
            e = ncl.event()
            e.record(s)
            ncl.stream_synchronize(s)
            return ncl.stream_query_status(s), g.handle

        assert ncl.set_compute_capability.__module__ + ".graphs" not in sys.modules
        with RecordingDriver() as fake:
            status, graph = record(7)
            recorded = graph in fake.graphs
        print(json.dumps([status, recorded, [c[0] for c in fake.calls]]))
    """)
    status, recorded, names = calls
    assert status == 0 and recorded
    for name in ("cuEventCreate", "cuEventRecord", "cuStreamSynchronize", "cuStreamQuery"):
        assert any(n.startswith(name) for n in names), (name, names)


@pytest.mark.skipif(not has_numba_cuda_mlir(), reason="needs numba-cuda-mlir")
@pytest.mark.skipif(HOST == "numba_cuda_mlir",
                    reason="built into numba-cuda-mlir, the package is imported with it")
def test_numba_cuda_mlir_is_extended_when_imported_after_the_package():
    seen = run_child("""
        import json, sys
        import numba_cuda_launch
        before = "numba_cuda_mlir" in sys.modules
        from numba_cuda_mlir import cuda
        from numba_cuda_launch.compat import overrides
        print(json.dumps([before, any(owner.startswith("numba_cuda_mlir")
                                      for owner, _ in overrides.installed())]))
    """)
    assert seen == [False, True]


# -- the import hook itself, on modules of a temporary directory ---------------------

@pytest.fixture
def toy_modules(tmp_path, monkeypatch):
    """A directory on sys.path where a test writes modules; their names are
    forgotten after the test."""
    monkeypatch.syspath_prepend(str(tmp_path))
    written = []

    def write(name, source):
        (tmp_path / (name + ".py")).write_text(source)
        written.append(name)
        return name
    yield write
    for name in written:
        sys.modules.pop(name, None)


def test_a_callback_runs_once_the_module_has_run_not_before(toy_modules):
    import importlib
    import importlib.util

    from numba_cuda_launch.compat.import_hooks import when_imported

    name = toy_modules("ncl_toy_probe", "VALUE = 7\n")
    seen = []
    when_imported(name, lambda: seen.append(sys.modules[name].VALUE))
    assert importlib.util.find_spec(name) is not None  # a probe, as libraries make
    assert seen == []
    importlib.import_module(name)
    assert seen == [7]
    when_imported(name, lambda: seen.append("late"))  # asked after the import: now
    assert seen == [7, "late"]


def test_an_import_that_fails_leaves_the_callback_waiting(toy_modules):
    import importlib

    from numba_cuda_launch.compat.import_hooks import when_imported

    name = toy_modules("ncl_toy_fails", "raise RuntimeError('not yet')\n")
    seen = []
    when_imported(name, lambda: seen.append(name))
    with pytest.raises(RuntimeError, match="not yet"):
        importlib.import_module(name)
    assert seen == []
    toy_modules(name, "VALUE = 1\n")
    importlib.invalidate_caches()
    importlib.import_module(name)
    assert seen == [name]


def test_a_failing_callback_is_a_warning_and_the_import_goes_on(toy_modules):
    import importlib

    from numba_cuda_launch.compat.import_hooks import when_imported

    name = toy_modules("ncl_toy_warns", "VALUE = 2\n")

    def fail():
        raise ValueError("cannot extend")
    when_imported(name, fail)
    with pytest.warns(RuntimeWarning, match="could not extend ncl_toy_warns: ValueError: "
                                            "cannot extend"):
        module = importlib.import_module(name)
    assert module.VALUE == 2


def test_a_source_whose_registration_fails_is_not_registered():
    from numba_cuda_launch import kernels

    class Broken(kernels.KernelSource):
        name = "broken source"

    def listener(source):
        if source.name == "broken source":
            raise RuntimeError("listener failed")
    kernels.on_register(listener)
    try:
        with pytest.raises(RuntimeError, match="listener failed"):
            kernels.register(Broken())
        assert "broken source" not in [s.name for s in kernels.SOURCES]
    finally:
        kernels._LISTENERS.remove(listener)
