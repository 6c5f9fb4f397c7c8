"""The public modules (numba_cuda_launch.graphs, .jax, .testing, .xla_ffi,
.aot, .tvm_ffi) are modules of their own exporting exactly their implementation's
public names, ``import numba_cuda_launch`` does not import JAX, and every
public function, method and property is annotated in the module defining it
(parameters and return; an intrinsic, declared for checkers under
``TYPE_CHECKING``). tests/test_type_hints.py runs mypy on programs using
them."""

import ast
import importlib
import inspect
import os
import pickle
import subprocess
import sys

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
    "numba_cuda_launch.tvm_ffi": ("numba_cuda_launch.interop.tvm_ffi_function",
                                  "numba_cuda_launch.interop.tvm_ffi_abi"),
}


def _import(name):
    """The module *name*; its test is skipped where JAX or apache-tvm-ffi
    (what the module wraps) is not installed."""
    if name.endswith(".jax"):
        pytest.importorskip("jax")
    if "tvm_ffi" in name:
        pytest.importorskip("tvm_ffi")
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
    # Installed (ci/check_package.sh), this is the package as shipped: marked
    # typed, with no stub, which would hide the modules' own hints.
    assert os.path.exists(os.path.join(package_source(), "py.typed"))
    stubs = [os.path.join(d, f) for d, _, files in os.walk(package_source())
             for f in files if f.endswith(".pyi")]
    assert stubs == []


@pytest.mark.slow
def test_import_of_the_package_does_not_import_jax():
    code = ("import sys, numba_cuda_launch, numba_cuda_launch.graphs, numba_cuda_launch.testing\n"
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))\n")
    out = subprocess.run([sys.executable, "-c", PREAMBLE + code], env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]"


# -- the type hints (in the modules defining the public names) ------------------------

PUBLIC_MODULES = ["numba_cuda_launch"] + sorted(PUBLIC)
# The package's own modules, under its name here (numba.cuda.cpu_launch when
# NCL_TEST_PATCHED runs the suite against a patched numba-cuda).
_PACKAGE = numba_cuda_launch.set_compute_capability.__module__
_METHODS = {"__init__", "__call__", "__enter__", "__exit__"}


def _own(obj):
    module = getattr(obj, "__module__", None) or ""
    return module == _PACKAGE or module.startswith(_PACKAGE + ".")


def _missing_hints(fn, method=False):
    """The parameters of *fn* (its first one skipped for a *method*) with no
    annotation, and "return" when its return has none."""
    params = list(inspect.signature(fn).parameters.values())[1 if method else 0:]
    missing = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    if inspect.signature(fn).return_annotation is inspect.Signature.empty:
        missing.append("return")
    return missing


def _class_functions(cls):
    """``(name, function, is a method)`` of the public methods and properties
    of *cls* and of its bases in the package (a dataclass's generated
    ``__init__`` too)."""
    seen = set()
    for klass in cls.__mro__:
        if not _own(klass) and klass is not cls:
            continue
        for name, value in vars(klass).items():
            if name in seen or (name.startswith("_") and name not in _METHODS):
                continue
            seen.add(name)
            qualname = "%s.%s" % (cls.__name__, name)
            if isinstance(value, property):
                yield qualname, value.fget, True
            elif isinstance(value, (staticmethod, classmethod)):
                yield qualname, value.__func__, isinstance(value, classmethod)
            elif inspect.isfunction(value):
                yield qualname, value, True


def _intrinsic_declaration(module_name, name):
    """The ``def name`` under ``if TYPE_CHECKING:`` in module *module_name*:
    what checkers see of an intrinsic (called without its typing context)."""
    with open(importlib.import_module(module_name).__file__) as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def _declaration_missing_hints(node):
    a = node.args
    params = a.posonlyargs + a.args + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x]
    return [p.arg for p in params if p.annotation is None] + (
        ["return"] if node.returns is None else [])


def _unannotated(module_name):
    """``{public name: its parameters lacking hints}`` of module *module_name*."""
    module = _import(module_name)
    found = {}
    for name in module.__all__:
        obj = getattr(module, name)
        if hasattr(obj, "_defn") and callable(obj):  # a Numba intrinsic
            node = _intrinsic_declaration(obj._defn.__module__, name)
            found[name] = ["no declaration for checkers"] if node is None else \
                _declaration_missing_hints(node)
        elif inspect.isclass(obj) and _own(obj):
            for qualname, fn, method in _class_functions(obj):
                found[qualname] = _missing_hints(fn, method)
        elif inspect.isfunction(inspect.unwrap(obj)) and _own(obj):  # lru_cache-d too
            found[name] = _missing_hints(obj)
    return {name: missing for name, missing in found.items() if missing}


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_every_public_function_is_annotated(module_name):
    # What checkers read (PEP 561: py.typed, and these hints in the modules
    # themselves); pyproject's [tool.mypy] checks the code against them.
    assert _unannotated(module_name) == {}


def test_a_public_function_without_hints_is_found(monkeypatch):
    from numba_cuda_launch import testing

    def occupancy_model(block_size, sharedmem: int):
        return 0

    occupancy_model.__module__ = testing.RecordingDriver.__module__
    monkeypatch.setattr(testing, "occupancy_model", occupancy_model)
    monkeypatch.setattr(testing.RecordingDriver, "use_device", lambda self, ordinal: None)
    assert _unannotated("numba_cuda_launch.testing") == {
        "occupancy_model": ["block_size", "return"],
        "RecordingDriver.use_device": ["ordinal", "return"]}


def test_an_intrinsic_without_a_declaration_is_found():
    # ok() and is_error() are intrinsics declared for checkers beside them
    node = _intrinsic_declaration("numba_cuda_launch.interop.xla_ffi", "is_error")
    assert node is not None and _declaration_missing_hints(node) == []
    assert _intrinsic_declaration("numba_cuda_launch.interop.xla_ffi", "_null") is None
    bare = ast.parse("def is_error(err): ...").body[0]
    assert _declaration_missing_hints(bare) == ["err", "return"]
