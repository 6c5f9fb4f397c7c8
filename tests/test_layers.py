"""The package's layers: imports point one way (interop -> launch -> kernels
-> cudadrv -> compat, with errors/config below all), no module imports
another that imports it back, and inside every package the same holds for
its rooms (its modules, and each subpackage taken whole): a module of a
subpackage never imports a module of its parent that imports the subpackage
(no arrow from a lower floor to a higher one). Every import counts, also one
inside a function."""

import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "numba_cuda_launch")

# Higher numbers may import lower ones, never the reverse.
LAYERS = {"compat": 0, "cudadrv": 1, "kernels": 2, "launch": 3, "interop": 4}
BASE = {"errors", "config", "_version"}
PUBLIC = {"__init__", "jax", "xla_ffi", "testing", "graphs", "aot", "tvm_ffi"}  # the public surface, above all


def _modules():
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)[:-3].split(os.sep)
                if rel[-1] == "__init__" and len(rel) > 1:
                    rel = rel[:-1]
                out[".".join(["numba_cuda_launch"] + rel)] = os.path.join(dirpath, f)
    return out


MODULES = _modules()


def layer(name):
    parts = name.split(".")[1:]
    if parts[0] in LAYERS:
        return LAYERS[parts[0]]
    if parts[0] in BASE:
        return -1
    assert parts[0] in PUBLIC, "module %s belongs to no layer" % name
    return 5


def _resolve(name):
    """The package module an import names (a module, else its package)."""
    while name not in MODULES and "." in name:
        name = name.rsplit(".", 1)[0]
    return name if name in MODULES else None


def imports_of(module):
    with open(MODULES[module]) as f:
        tree = ast.parse(f.read())
    found = set()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                pkg = module if MODULES[module].endswith("__init__.py") else module.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    pkg = pkg.rsplit(".", 1)[0]
                base = pkg + "." + base
            names = [base + "." + a.name for a in node.names] + [base]
        for n in names:
            if n.startswith("numba_cuda_launch"):
                target = _resolve(n)
                if target and target != module:
                    found.add(target)
    # `from pkg import sub` names both pkg and pkg.sub: keep the deepest.
    return {t for t in found if not any(o.startswith(t + ".") for o in found)} or found


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer():
    for m in MODULES:
        layer(m)


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_upward_import(module):
    bad = [t for t in GRAPH[module] if layer(t) > layer(module)]
    assert not bad, "%s (layer %d) imports from a higher layer: %s" % (
        module, layer(module), ", ".join("%s (layer %d)" % (t, layer(t)) for t in bad))


def find_cycles(graph):
    """Every cycle a depth-first walk of *graph* ({module: imports}) meets."""
    state, stack, cycles = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == "open":
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m)
    return cycles


def test_no_import_cycles():
    cycles = find_cycles(GRAPH)
    assert not cycles, "import cycles: %s" % "; ".join(" -> ".join(c) for c in cycles)


def test_the_checks_can_fail():
    # A cycle and an upward import planted in a copy of the real graph.
    graph = {m: set(t) for m, t in GRAPH.items()}
    graph["numba_cuda_launch.cudadrv.driver"].add("numba_cuda_launch.launch.backends.driver")
    assert find_cycles(graph)
    assert layer("numba_cuda_launch.cudadrv.driver") < layer("numba_cuda_launch.launch.backends.driver")
    # The walk does see real edges, lazy (in-function) imports included.
    assert "numba_cuda_launch.cudadrv.driver" in GRAPH["numba_cuda_launch.launch.backends.driver"]
    assert "numba_cuda_launch.errors" in GRAPH["numba_cuda_launch.cudadrv.recording"]


def _packages():
    return sorted({m for m, path in MODULES.items() if path.endswith("__init__.py")})


def room_graph(package, graph):
    """The imports between the rooms of *package*: each module directly in
    it, and each subpackage taken whole (the package's own ``__init__`` is
    left out: it is the package's face, importing its rooms)."""
    def room(module):
        if not module.startswith(package + "."):
            return None
        return package + "." + module[len(package) + 1:].split(".")[0]

    rooms = {}
    for module, targets in graph.items():
        source = room(module)
        if source is None:
            continue
        rooms.setdefault(source, set())
        for target in targets:
            to = room(target)
            if to is not None and to != source:
                rooms[source].add(to)
    return rooms


@pytest.mark.parametrize("package", _packages())
def test_no_arrow_up_inside_a_package(package):
    cycles = find_cycles(room_graph(package, GRAPH))
    assert not cycles, "inside %s, rooms import each other: %s" % (
        package, "; ".join(" -> ".join(c) for c in cycles))


def test_the_room_check_can_fail():
    # A subpackage's module importing a module of its parent that imports
    # the subpackage: an arrow from a lower floor to a higher one.
    graph = {m: set(t) for m, t in GRAPH.items()}
    assert "numba_cuda_launch.launch.backends" in GRAPH["numba_cuda_launch.launch.plan"]
    graph["numba_cuda_launch.launch.backends.driver"].add("numba_cuda_launch.launch.plan")
    assert find_cycles(room_graph("numba_cuda_launch.launch", graph))
    assert not find_cycles(room_graph("numba_cuda_launch.launch", GRAPH))
