"""The override surface: every replacement of another library's attribute is
declared in compat/overrides.py, installed, and listed in docs/overrides.md;
no other module assigns to another library's modules or classes.

The scan below is an AST walk: a name is foreign when it is bound by an
import of a non-stdlib package other than this one, or assigned from an
attribute, item or ``getattr`` of a foreign name (``importlib.import_module``
and ``sys.modules`` lookups too). Flagged: assigning or deleting an attribute
or item of a foreign name, ``setattr``/``delattr`` on one, registering a
foreign single-dispatch function for ``object``, and writing into an
object's ``__dict__`` (or ``vars()``) other than ``self``'s.
"""

import ast
import os
import re
import subprocess
import sys

import pytest

import numba_cuda_launch  # noqa: F401  (installs the overrides)
from numba_cuda_launch.compat import overrides
from support import ROOT, package_source
from support.childenv import PREAMBLE, child_env

PACKAGE = package_source()
SURFACE = os.path.join(PACKAGE, "compat", "overrides.py")


def _is_foreign_module(name):
    top = name.split(".")[0]
    return top != "numba_cuda_launch" and top not in sys.stdlib_module_names


class _Scope:
    def __init__(self, parent=None):
        self.parent, self.names = parent, {}

    def foreign(self, name):
        scope = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return False


def _root(node):
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node


def _tainted(node, scope):
    if isinstance(node, ast.Name):
        return scope.foreign(node.id)
    if isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(_root(node), ast.Name) and _root(node).id == "sys" and \
                "modules" in ast.unparse(node):
            return True
        return _tainted(node.value, scope)
    if isinstance(node, ast.Call):
        func = ast.unparse(node.func)
        if func == "getattr" and node.args:
            return _tainted(node.args[0], scope)
        return func.endswith("import_module") or func.startswith("sys.modules")
    return False


def _body_bindings(body):
    """The statements of *body* that bind names in its scope (not those of
    nested functions and classes)."""
    for stmt in body:
        for node in ast.walk(stmt) if not isinstance(
                stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else (stmt,):
            yield node


def _bind(body, scope):
    nodes = list(_body_bindings(body))
    for node in nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            scope.names.setdefault(node.name, False)
        elif isinstance(node, ast.Import):
            for a in node.names:
                scope.names[(a.asname or a.name).split(".")[0]] = _is_foreign_module(a.name)
        elif isinstance(node, ast.ImportFrom):
            for a in node.names:
                scope.names[a.asname or a.name] = bool(node.module) and not node.level and \
                    _is_foreign_module(node.module)
    for _ in range(3):  # assignments from foreign names, to a fixed point
        for node in nodes:
            if isinstance(node, ast.Assign):
                for t in node.targets:
                    if isinstance(t, ast.Name) and not scope.names.get(t.id):
                        scope.names[t.id] = _tainted(node.value, scope)


def _targets(node):
    if isinstance(node, (ast.Assign, ast.Delete)):
        out = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        out = [node.target]
    else:
        return []
    flat = []
    while out:
        t = out.pop()
        if isinstance(t, (ast.Tuple, ast.List)):
            out.extend(t.elts)
        else:
            flat.append(t)
    return flat


def _is_instance_dict(node):
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return not (isinstance(node.value, ast.Name) and node.value.id == "self")
    return isinstance(node, ast.Call) and ast.unparse(node.func) == "vars"


def _violations(body, scope, filename):
    _bind(body, scope)
    found = []
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = _Scope(scope)
            args = stmt.args
            for a in args.posonlyargs + args.args + args.kwonlyargs + \
                    [x for x in (args.vararg, args.kwarg) if x]:
                inner.names[a.arg] = False
            found += _violations(stmt.body, inner, filename)
            continue
        if isinstance(stmt, ast.ClassDef):
            found += _violations(stmt.body, _Scope(scope), filename)
            continue
        for node in ast.walk(stmt):
            for t in _targets(node):
                if isinstance(t, ast.Attribute) and _tainted(t.value, scope) or \
                        isinstance(t, ast.Subscript) and (_tainted(t.value, scope)
                                                          or _is_instance_dict(t.value)):
                    found.append("%s:%d: %s" % (filename, node.lineno, ast.unparse(t)))
            if isinstance(node, ast.Call) and node.args:
                func = ast.unparse(node.func)
                if func in ("setattr", "delattr") and _tainted(node.args[0], scope) or \
                        func.endswith(".register") and _tainted(node.func, scope) and \
                        ast.unparse(node.args[0]) == "object":
                    found.append("%s:%d: %s" % (filename, node.lineno, ast.unparse(node)))
    return found


def foreign_assignments(source, filename="<snippet>"):
    """The assignments to other libraries' modules, classes and objects in
    *source*, as ``file:line: target`` strings."""
    return _violations(ast.parse(source).body, _Scope(), filename)


def _package_files():
    for dirpath, _, files in os.walk(PACKAGE):
        for f in sorted(files):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def test_no_foreign_assignment_outside_the_override_surface():
    found = []
    for path in _package_files():
        if path != SURFACE:
            with open(path) as f:
                found += foreign_assignments(f.read(), os.path.relpath(path, PACKAGE))
    assert found == []


@pytest.mark.parametrize("snippet", [
    "from numba.core import dispatcher\ndispatcher.Dispatcher.compile = None\n",
    "import numba.cuda\nnumba.cuda.jit = None\n",
    "from numba import cuda\ndef f():\n    cuda.jit = None\n",
    "def f():\n    from numba.cuda import dispatcher\n    dispatcher.get_current_device = f\n",
    "from numba.core import dispatcher as d\nD = d.Dispatcher\nD.typeof_pyval = None\n",
    "from numba.core import dispatcher as d\nF = getattr(d, '_FunctionCompiler')\n"
    "F.compile = None\n",
    "import importlib\ntools = importlib.import_module('numba_cuda_mlir.tools')\n"
    "tools._cached_cc = (9, 0)\n",
    "from numba.core.datamodel import default_manager\n"
    "default_manager._handlers[float] = None\n",
    "from numba.core.pythonapi import _boxers\nsetattr(_boxers, 'lookup', None)\n",
    "from numba.core.typing.typeof import typeof_impl\n"
    "typeof_impl.register(object)(lambda v, c: None)\n",
    "def read(val):\n    val.__dict__['cache'] = 1\n",
    "def read(val):\n    vars(val)['cache'] = 1\n",
    "from numba import cuda\ncuda.jit, x = None, 1\n",
    "from numba import cuda\ndel cuda.jit\n",
], ids=["class", "module", "in-function", "local-import", "alias", "getattr-alias",
        "import_module", "mapping-entry", "setattr", "register-object", "instance-dict",
        "vars", "tuple-target", "delete"])
def test_the_scan_finds(snippet):
    assert len(foreign_assignments(snippet)) == 1, snippet


@pytest.mark.parametrize("snippet", [
    "class A:\n    def f(self):\n        self.x = 1\n        self.__dict__['y'] = 2\n",
    "from llvmlite import ir\ndef f(builder):\n    gv = ir.GlobalVariable(builder.module, "
    "ir.IntType(8), 'g')\n    gv.linkage = 'internal'\n",
    "import ctypes\nf = ctypes.pythonapi.PyCapsule_GetPointer\nf.restype = ctypes.c_void_p\n",
    "from numba.core import types\ndef f(types):\n    types.x = 1\n",
    "from numba.extending import typeof_impl\nclass C:\n    pass\n"
    "typeof_impl.register(C)(lambda v, c: None)\n",
], ids=["self", "new-llvm-object", "stdlib", "shadowing-parameter", "register-own-class"])
def test_the_scan_leaves(snippet):
    assert foreign_assignments(snippet) == []


def test_every_declared_override_whose_condition_holds_is_in_place():
    done = overrides.installed()
    for o in overrides.OVERRIDES:
        if not o.when():
            continue
        original, value = done[(o.owner, o.attribute)]
        read, _ = overrides._slot(o)
        assert read() is value, (o.owner, o.attribute)
        assert value is not original, (o.owner, o.attribute)


@pytest.mark.slow
def test_the_import_installs_them():
    code = ("import numba_cuda_launch\n"
            "from numba_cuda_launch.compat import overrides as o\n"
            "print(sorted(o.installed()) == sorted((x.owner, x.attribute) "
            "for x in o.OVERRIDES if x.when()), len(o.installed()))\n")
    out = subprocess.run([sys.executable, "-c", PREAMBLE + code], env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    same, count = out.stdout.split()[-2:]
    assert same == "True" and int(count) >= 10


def test_install_again_changes_nothing():
    before = overrides.installed()
    overrides.install()
    assert overrides.installed() == before


def test_docs_list_every_declaration():
    doc = os.path.join(ROOT, "docs", "overrides.md")
    if not os.path.exists(doc):
        pytest.skip("docs/ is not beside these tests (tests copied next to an installed package)")
    with open(doc) as f:
        doc = f.read()
    assert overrides.markdown_table() in doc, \
        "regenerate the table: see docs/overrides.md"


def test_every_instance_attribute_the_package_names_is_declared():
    declared = {a.attribute for a in overrides.INSTANCE_ATTRIBUTES}
    named = set()
    for path in _package_files():
        with open(path) as f:
            named |= set(re.findall(r"[\"'](_(?:ncl|numba_cuda_launch)_\w+)[\"']", f.read()))
    assert named - declared == set()


def test_an_undeclared_instance_attribute_is_refused():
    class Holder:
        pass

    with pytest.raises(KeyError, match="'_ncl_undeclared' is not a declared instance attribute"):
        overrides.set_instance_attribute(Holder(), "_ncl_undeclared", 1)


def test_a_declared_instance_attribute_is_stored():
    class Holder:
        pass

    h = Holder()
    overrides.set_instance_attribute(h, "_numba_cuda_launch_fields", (0, None))
    assert h.__dict__ == {"_numba_cuda_launch_fields": (0, None)}
