"""mypy, run as a user's type checker runs it (the package found as installed
or on ``MYPYPATH``, errors in it and in other libraries silenced), on
programs using the public API: one using it as documented passes, each line
of one misusing it is an error naming what was expected, and no public name
is ``Any`` to it (an intrinsic, or a function behind a decorator without
hints, would be). mypy comes with the ``[test]`` extra; pyproject.toml's
``[tool.mypy]`` checks the package itself (.ci/run)."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

import numba_cuda_launch

pytestmark = pytest.mark.slow

GOOD = '''
import numpy as np

import numba_cuda_launch as ncl
from numba_cuda_launch import aot, graphs, xla_ffi
from numba_cuda_launch.jax import JaxKernel, jax_kernel
from numba_cuda_launch.testing import Launch, RecordedGraph, RecordingDriver


def capture(stream: int, cfg: object) -> graphs.GraphExec:
    graphs.begin_capture(stream, graphs.CAPTURE_RELAXED)
    node: graphs.KernelNode = graphs.last_launch(stream)
    status, graph = graphs.end_capture_status(stream)
    exe = graph.instantiate()
    exe.update(graphs.end_capture(stream))
    exe.update_launch(node, cfg, 1.0, 2)          # nopython code only
    status = exe.launch_status(stream) + graph.instantiate_status()[0]
    exe.launch(stream)
    handle = graphs.conditional_handle(stream, default=1, assign_default=True)
    switch = graphs.add_switch(stream, handle, 3)
    graphs.begin_body(stream, switch, index=2, mode=graphs.CAPTURE_GLOBAL)
    graphs.end_body(stream)
    graphs.set_conditional(handle, True)
    return exe


def handler(frame: int) -> int:
    err = xla_ffi.check_arg(frame, 0, np.float32, 1, "scale")
    if xla_ffi.is_error(err):
        return err
    n: int = xla_ffi.attr_int(frame, "n", default=3) + xla_ffi.buffer_dim(
        xla_ffi.arg_buffer(frame, 0), 0)
    x: float = xla_ffi.attr_float(frame, "x") + xla_ffi.half_bits_to_float(n)
    return xla_ffi.error(frame, xla_ffi.c_string("no")) if x < 0 else xla_ffi.ok()


ncl.set_compute_capability((9, 0))
ncl.set_compute_capability("sm_90")
ncl.set_compute_capability([9, 0])
ncl.set_compute_capability([(8, 0), "9.0"])
ncl.set_compute_capability(None)
lowest: tuple[int, int] | None = ncl.get_compute_capability()
ev = ncl.event(timing=True)
ev.record(ncl.on_stream(np.zeros(1), 0).stream)
ms: float = ev.elapsed_time(ncl.event())
ready: bool = ncl.stream_query(0) and ncl.stream_synchronize_status(0) == 0
size: int = ncl.kernel_handle(object(), "void(float32[::1])").params[0].size
with RecordingDriver(launch_status=0, compute_capability=(9, 0)) as rec:
    launches: list[Launch] = rec.launches
    graphs_made: list[RecordedGraph] = list(rec.graphs.values())
kernel: JaxKernel = jax_kernel(object(), None, ((1,), (32,)), scalars={"n": np.int64})
names: list[str] = kernel.target_names + [kernel.register(np.zeros(4), n=4)]
library = aot.build("build/libx.so", {"x_launch": object()}, prefix="x")
header: str = library.header
try:
    ncl.synchronize()
except ncl.CudaLaunchError as exc:
    code: int = exc.code
'''

# Each line followed by a comment "# E: text" must be an error whose message
# has text.
BAD = '''
import numba_cuda_launch as ncl
from numba_cuda_launch import graphs, xla_ffi
from numba_cuda_launch.jax import jax_kernel
from numba_cuda_launch.testing import RecordingDriver

handle = graphs.conditional_handle(0)
graphs.add_switch(0, handle, "3")
# E: Argument 3 to "add_switch" has incompatible type "str"; expected "int"
graphs.begin_capture(0, mode="global")
# E: Argument "mode" to "begin_capture" has incompatible type "str"; expected "int"
graphs.end_capture(0).instantiate().update(graphs.last_launch(0))
# E: Argument 1 to "update" of "GraphExec" has incompatible type "KernelNode"; expected "Graph"
ncl.set_compute_capability(9.0)
# E: Argument 1 to "set_compute_capability" has incompatible type "float"
ncl.event(timing="yes")
# E: Argument "timing" to "event" has incompatible type "str"; expected "bool"
status: str = ncl.synchronize_status()
# E: Incompatible types in assignment (expression has type "int", variable has type "str")
ncl.as_voidptr("0x10")
# E: Argument 1 to "as_voidptr" has incompatible type "str"; expected "int"
xla_ffi.attr_int(0, "n", default="0")
# E: Argument "default" to "attr_int" has incompatible type "str"; expected "int"
xla_ffi.is_error(None)
# E: Argument 1 to "is_error" has incompatible type "None"; expected "int"
RecordingDriver(launch_status="0")
# E: Argument "launch_status" to "RecordingDriver" has incompatible type "str"; expected "int"
jax_kernel(object(), None, (1, 32), sharedmem="0")
# E: Argument "sharedmem" to "jax_kernel" has incompatible type "str"; expected "int"
'''

PUBLIC_MODULES = ["numba_cuda_launch", "numba_cuda_launch.aot", "numba_cuda_launch.graphs",
                  "numba_cuda_launch.jax", "numba_cuda_launch.testing",
                  "numba_cuda_launch.xla_ffi"]


def _names_program():
    """reveal_type() of every public name, one per line; and the names."""
    import importlib

    lines, names = [], []
    for i, module_name in enumerate(PUBLIC_MODULES):
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # .jax without JAX: mypy reads it all the same
            module = None
        lines.append("import %s as m%d" % (module_name, i))
        for name in (module.__all__ if module is not None else ()):
            names.append("%s.%s" % (module_name, name))
            lines.append("reveal_type(m%d.%s)" % (i, name))
    return "\n".join(lines) + "\n", names


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    """mypy's lines about good.py, bad.py and names.py, run once."""
    pytest.importorskip("mypy")
    if os.environ.get("NCL_TEST_PATCHED") in ("1", "mlir"):
        pytest.skip("the patched numba-cuda ships no type hints (no py.typed)")
    tmp = tmp_path_factory.mktemp("mypy")
    names_text, names = _names_program()
    for name, text in (("good.py", GOOD), ("bad.py", BAD), ("names.py", names_text)):
        (tmp / name).write_text(textwrap.dedent(text))
    (tmp / "mypy.ini").write_text(
        "[mypy]\nignore_missing_imports = True\nfollow_imports = silent\n")
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(numba_cuda_launch.__file__)))
    if os.path.basename(root) not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = root  # a checkout (an editable install mypy cannot follow)
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--cache-dir",
         str(tmp / "cache"), "--show-error-codes", "--no-error-summary", "--no-pretty",
         "good.py", "bad.py", "names.py"],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 1), out.stdout + out.stderr  # 2: mypy itself failed
    found = {}
    for line in out.stdout.splitlines():
        m = re.match(r"(\w+\.py):(\d+): (error|note): (.*)", line)
        assert m, line
        found.setdefault(m.group(1), []).append((int(m.group(2)), m.group(3), m.group(4)))
    return found, names


def test_a_program_using_the_api_as_documented_passes(checked):
    found, _ = checked
    assert found.get("good.py", []) == []


def test_each_misuse_is_an_error_saying_what_was_expected(checked):
    found, _ = checked
    lines = textwrap.dedent(BAD).splitlines()
    expected = {i: line[len("# E: "):]  # line i (from 1) is the one above
                for i, line in enumerate(lines) if line.startswith("# E: ")}
    errors = {}
    for line, kind, text in found.get("bad.py", []):
        assert kind == "error", (line, text)
        errors.setdefault(line, []).append(text)
    assert sorted(errors) == sorted(expected), errors
    for line, text in expected.items():
        assert any(text in e for e in errors[line]), (line, errors[line])


def test_no_public_name_is_any_to_checkers(checked):
    found, names = checked
    revealed = [text for _, kind, text in found.get("names.py", []) if kind == "note"]
    assert len(revealed) == len(names) > 100
    # Any, or Numba's intrinsic object (called with a typing context first)
    untyped = [name for name, text in zip(names, revealed)
               if text == 'Revealed type is "Any"' or "_Intrinsic" in text]
    assert untyped == []
    assert [t for _, kind, t in found.get("names.py", []) if kind == "error"] == []
