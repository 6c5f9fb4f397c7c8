"""Every example and every Python block of README.md runs to completion in a
fresh process, so that what the README shows stays true.

With a GPU they run on it. Without one, README blocks run under numba-cuda's
CUDA simulator (as the README's first block says), and the examples choose
for themselves: the simulator, the recording driver, or one line saying what
they need and exit status 0. A README block preceded by ``<!-- fragment -->``
is not a whole program and is not run; one preceded by
``<!-- no-simulator -->`` runs without the simulator (it uses the recording
driver when there is no GPU).
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda

from support.childenv import PREAMBLE, ROOT, child_env

README = os.path.join(ROOT, "README.md")
EXAMPLES = sorted(p for p in glob.glob(os.path.join(ROOT, "examples", "*.py"))
                  if not os.path.basename(p).startswith("_"))  # _*.py: shared by examples
MARKERS = ("fragment", "no-simulator")
TIMEOUT = 300  # seconds per program; most take 3-10 on two cores
SIMULATED = os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"
HAVE_GPU = cuda.is_available() and not SIMULATED


def readme_blocks():
    """``[(line, marker, source)]``: README.md's python blocks, with the
    marker comment on the line before each (None when there is none)."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    blocks = []
    for m in re.finditer(r"^```python\n(.*?)^```$", text, re.M | re.S):
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = re.fullmatch(r"<!--\s*(.*?)\s*-->", before)
        blocks.append((text.count("\n", 0, m.start()) + 1,
                       marker.group(1) if marker else None, m.group(1)))
    return blocks


def _run(path, args=(), simulator=False, cwd=ROOT):
    """Run the program at *path* as ``__main__`` in a fresh interpreter;
    returns its output. Fails on a non-zero exit status or a traceback."""
    env = child_env()
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    # sys.path[0] is the program's folder (not the working directory), as
    # `python path` makes it
    runner = PREAMBLE + ("import runpy, sys\nsys.argv = %r\nsys.path[0] = %r\n"
                         "runpy.run_path(%r, run_name='__main__')\n"
                         % ([path] + list(args), os.path.dirname(path), path))
    out = subprocess.run([sys.executable, "-c", runner], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=TIMEOUT)
    shown = out.stdout[-3000:] + out.stderr[-6000:]
    assert out.returncode == 0, shown
    assert "Traceback" not in out.stderr, shown
    return out.stdout


def test_readme_markers_are_known_and_whole_programs_remain():
    blocks = readme_blocks()
    unknown = [(line, marker) for line, marker, _ in blocks
               if marker is not None and marker not in MARKERS]
    assert not unknown, "unknown README block markers %s (known: %s)" % (unknown, MARKERS)
    runnable = [line for line, marker, _ in blocks if marker != "fragment"]
    assert len(runnable) >= 5, "only README blocks at lines %s are run" % runnable


@pytest.mark.slow
@pytest.mark.parametrize("line, marker, source",
                         [pytest.param(*b, id="README.md:%d" % b[0])
                          for b in readme_blocks() if b[1] != "fragment"])
def test_readme_block_runs(tmp_path, line, marker, source):
    path = tmp_path / ("readme_line%d.py" % line)
    path.write_text(source)
    _run(str(path), simulator=not HAVE_GPU and marker != "no-simulator", cwd=str(tmp_path))


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLES, ids=os.path.basename)
def test_example_runs(example):
    out = _run(example)
    assert out.strip(), "an example says what it did (or what it needs)"


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="--record is the no-GPU mode of seed_cfunc.py")
def test_seed_cfunc_records_without_a_gpu():
    out = _run(os.path.join(ROOT, "examples", "seed_cfunc.py"), ["--record"])
    assert "cuLaunchKernel(kernel_gpu, grid=(1000, 1, 1), block=(128, 1, 1)" in out, out


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="--record is the no-GPU mode of graph_loop.py")
def test_graph_loop_records_without_a_gpu():
    out = _run(os.path.join(ROOT, "examples", "graph_loop.py"), ["--record"])
    assert "4 launches captured, 5 replays, 5 node updates: as expected" in out, out


@pytest.mark.slow
@pytest.mark.skipif(HAVE_GPU, reason="the simulator is graph_loop.py's mode without a GPU")
def test_graph_loop_runs_under_the_simulator():
    out = _run(os.path.join(ROOT, "examples", "graph_loop.py"))
    assert "CUDA simulator" in out and "correct True" in out, out


def readme_c_library_commands():
    """The lines of README.md's bash block that builds the C library."""
    with open(README, encoding="utf-8") as f:
        text = f.read()
    for m in re.finditer(r"^```bash\n(.*?)^```$", text, re.M | re.S):
        if "numba-cuda-launch-aot" in m.group(1):
            return [line for line in m.group(1).splitlines()
                    if line.strip() and not line.startswith("#")]
    raise AssertionError("README.md has no bash block running numba-cuda-launch-aot")


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which(os.environ.get("CC") or "cc"), reason="no C compiler")
def test_readme_c_library_commands_run_as_written(tmp_path):
    # In a folder holding the checkout's examples, with this interpreter's
    # bin/ as the README's .venv/bin/ and no architecture set: on a machine
    # without a GPU examples/clib/build.py sets one itself.
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    venv_bin = os.path.dirname(sys.executable)
    env = child_env()
    env.pop("NUMBA_CUDA_LAUNCH_CC", None)
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    for line in readme_c_library_commands():
        command = line.split("#")[0].strip()
        if command.startswith(".venv/bin/numba-cuda-launch-aot") and not os.path.exists(
                os.path.join(venv_bin, "numba-cuda-launch-aot")):  # not installed: the module
            # its main() (python -m cannot run it through the alias of a patched numba-cuda)
            command = command.replace(".venv/bin/numba-cuda-launch-aot", (
                "%s -c 'import sys; from numba_cuda_launch.aot import main; sys.exit(main())'"
                % sys.executable))
        # the README's relative .venv/bin/, not one inside an absolute path
        command = re.sub(r"(?<![\w./-])\.venv/bin/", venv_bin + "/", command)
        done = subprocess.run(command, shell=True, cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=TIMEOUT)
        assert done.returncode == 0, (line, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, (line, done.stderr)
    assert (tmp_path / "build" / "libsaxpy.so").exists()
    assert "saxpy" in done.stdout  # the program says what it checked (or that it needs a GPU)


@pytest.mark.slow
def test_readme_recording_block_under_the_simulator_refuses_to_start(tmp_path):
    # The README's first lines suggest NUMBA_ENABLE_CUDASIM=1 for a machine
    # without a GPU; the recording block run that way says why it cannot
    # (it used to warn, then crash on the fake address).
    (line, _, source), = [b for b in readme_blocks() if "RecordingDriver() as rec" in b[2]]
    path = tmp_path / ("readme_line%d.py" % line)
    path.write_text(source)
    env = child_env(NUMBA_ENABLE_CUDASIM="1")
    out = subprocess.run([sys.executable, "-c", PREAMBLE + "import runpy\nrunpy.run_path(%r)"
                          % str(path)], env=env, cwd=str(tmp_path), capture_output=True,
                         text=True, timeout=TIMEOUT)
    assert out.returncode == 1, (out.returncode, out.stderr[-3000:])
    assert out.stderr.rstrip().splitlines()[-1].startswith(
        "RuntimeError: RecordingDriver cannot record launches in this process: under "
        "numba-cuda's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)"), out.stderr[-3000:]


FORGOTTEN_IMPORT = """
import sys
import numpy as np
from numba import cuda, njit

@cuda.jit
def double(x):
    x[0] = 2 * x[0]

@njit
def step(x):
    double[1, 1](x)

try:
    step(np.ones(1))
except Exception as exc:
    print(type(exc).__name__, "|", " ".join(str(exc).split()))
print("imported:", "numba_cuda_launch" in sys.modules)
"""


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("NCL_TEST_PATCHED") in ("1", "mlir"),
                    reason="a numba-cuda built from patches/ launches from CPU code without "
                    "an import: there is no import to forget")
@pytest.mark.parametrize("simulator, said, quoted", [
    (False, "No implementation of function Function(<built-in function getitem>) found for "
            "signature: >>> getitem(type(CUDADispatcher(<function double at ",
     "No implementation of function Function(<built-in function getitem>) found for "
     "signature: getitem(type(CUDADispatcher(...)), ...)"),
    (True, "Untyped global name 'double': Cannot determine Numba type of <class "
           "'numba.cuda.simulator.kernel.FakeCUDAKernel'>",
     "Untyped global name 'kernel': Cannot determine Numba type of <class "
     "'numba.cuda.simulator.kernel.FakeCUDAKernel'>"),
])
def test_troubleshooting_forgotten_import_reads_as_the_readme_says(simulator, said, quoted):
    # README's Troubleshooting quotes Numba's errors for the likeliest first
    # mistake; they come from Numba, so this checks they still read so.
    with open(README, encoding="utf-8") as f:
        text = f.read()
    assert quoted in text[text.index("## Troubleshooting"):text.index("## How it is built")]
    env = child_env()
    env.pop("NUMBA_ENABLE_CUDASIM", None)
    if simulator:
        env["NUMBA_ENABLE_CUDASIM"] = "1"
    out = subprocess.run([sys.executable, "-c", PREAMBLE + FORGOTTEN_IMPORT], env=env,
                         capture_output=True, text=True, timeout=TIMEOUT)
    error, imported = out.stdout.splitlines()[-2:]
    error = re.sub(r"\x1b\[[0-9;]*m", "", error)  # Numba's highlighting, where it colours
    assert imported == "imported: False", out.stdout + out.stderr
    assert error.startswith("TypingError | Failed in nopython mode pipeline")
    assert said in error, error
