"""The public modules (numba_cuda_launch.graphs, .jax, .testing, .xla_ffi)
are modules of their own exporting exactly their implementation's public
names, ``import numba_cuda_launch`` does not import JAX, and the type hints
(``.pyi`` stubs beside the package's public modules) name every public name
with the parameters the functions have."""

import ast
import importlib
import inspect
import os
import pickle
import subprocess
import sys
import types

import pytest

import numba_cuda_launch
from support import package_source
from support.childenv import PREAMBLE, child_env

PUBLIC = {
    "numba_cuda_launch.graphs": ("numba_cuda_launch.launch.graph",
                                 "numba_cuda_launch.launch.conditional"),
    "numba_cuda_launch.jax": "numba_cuda_launch.interop.jax",
    "numba_cuda_launch.testing": "numba_cuda_launch.cudadrv.recording",
    "numba_cuda_launch.xla_ffi": "numba_cuda_launch.interop.xla_ffi",
    "numba_cuda_launch.aot": "numba_cuda_launch.interop.aot",
}


def _import(name):
    """The module *name*; its test is skipped where JAX (what the module
    wraps) is not installed."""
    if name.endswith(".jax"):
        pytest.importorskip("jax")
    return importlib.import_module(name)


@pytest.mark.parametrize("public", sorted(PUBLIC))
def test_public_module_exports_its_implementation(public):
    impls = PUBLIC[public] if isinstance(PUBLIC[public], tuple) else (PUBLIC[public],)
    pub, impls = _import(public), [_import(name) for name in impls]
    assert all(pub is not impl for impl in impls)
    assert pub.__doc__
    assert sorted(pub.__all__) == sorted(n for impl in impls for n in impl.__all__)
    for impl in impls:
        for name in impl.__all__:
            assert getattr(pub, name) is getattr(impl, name), name


def test_recording_driver_of_the_public_module_is_the_one_launches_use():
    from numba_cuda_launch.cudadrv import recording
    from numba_cuda_launch.testing import RecordingDriver

    with RecordingDriver() as rec:
        assert isinstance(rec, recording.RecordingDriver)


def test_a_recorded_launch_pickles_by_its_public_name():
    from numba_cuda_launch.testing import Launch

    fields = {f: 0 for f in Launch.__dataclass_fields__}
    launch = Launch(**fields)
    assert pickle.loads(pickle.dumps(launch)) == launch


def test_the_package_is_typed():
    # Installed (ci/check_package.sh), this is the package as shipped.
    assert os.path.exists(os.path.join(package_source(), "py.typed"))
    hints = numba_cuda_launch.set_compute_capability.__annotations__
    assert hints["return"] is None and "cc" in hints


@pytest.mark.slow
def test_import_of_the_package_does_not_import_jax():
    code = ("import sys, numba_cuda_launch, numba_cuda_launch.graphs, numba_cuda_launch.testing\n"
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n")
    out = subprocess.run([sys.executable, "-c", PREAMBLE + code], env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


# -- the type hints (.pyi stubs beside the public modules) ------------------------------

STUBBED = ["numba_cuda_launch"] + sorted(PUBLIC)


def _stub(module_name):
    module = _import(module_name)
    # the package source's stub (a patched numba-cuda carries the modules only)
    rel = os.path.join(*module_name.split(".")[1:]) if "." in module_name else "__init__"
    path = os.path.join(package_source(), rel + ".pyi")
    with open(path) as f:
        return module, ast.parse(f.read())


def _stub_names(tree):
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            names[node.target.id] = node
        elif isinstance(node, ast.ImportFrom) and node.module.startswith("numba_cuda_launch"):
            names.update({a.asname or a.name: node for a in node.names})
    return names


def _runtime_parameters(obj):
    fn = getattr(obj, "py_func", None) or getattr(obj, "_defn", None) or obj
    params = list(inspect.signature(fn).parameters.values())
    if getattr(obj, "_defn", None) is not None:
        params = params[1:]  # an intrinsic's typing context
    return [(p.name, p.kind, p.default is not p.empty) for p in params]


def _stub_parameters(fn):
    a = fn.args
    out = [(x.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD) for x in a.args]
    out += [(a.vararg.arg, inspect.Parameter.VAR_POSITIONAL)] if a.vararg else []
    out += [(x.arg, inspect.Parameter.KEYWORD_ONLY) for x in a.kwonlyargs]
    out += [(a.kwarg.arg, inspect.Parameter.VAR_KEYWORD)] if a.kwarg else []
    defaults = [False] * (len(a.args) - len(a.defaults)) + [True] * len(a.defaults)
    defaults += [False] if a.vararg else []
    defaults += [d is not None for d in a.kw_defaults] + ([False] if a.kwarg else [])
    return [(n, k, d) for (n, k), d in zip(out, defaults)]


@pytest.mark.parametrize("module_name", STUBBED)
def test_stub_names_every_public_name(module_name):
    module, tree = _stub(module_name)
    names = _stub_names(tree)
    assert set(module.__all__) - set(names) == set()
    extra = {n for n in names if not n.startswith("_") and n not in module.__all__}
    assert all(isinstance(getattr(module, n), types.ModuleType) for n in extra), extra


@pytest.mark.parametrize("module_name", STUBBED)
def test_stub_signatures_match_the_functions(module_name):
    module, tree = _stub(module_name)
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            assert _stub_parameters(node) == _runtime_parameters(getattr(module, node.name)), \
                node.name
        elif isinstance(node, ast.ClassDef):
            init = next(n for n in node.body if isinstance(n, ast.FunctionDef)
                        and n.name == "__init__")
            assert _stub_parameters(init)[1:] == _runtime_parameters(getattr(module, node.name)), \
                node.name


def test_a_stub_that_disagrees_is_found():
    wrong = ast.parse("def attr_int(frame: int, name: str) -> int: ...").body[0]
    from numba_cuda_launch import xla_ffi

    assert _stub_parameters(wrong) != _runtime_parameters(xla_ffi.attr_int)
