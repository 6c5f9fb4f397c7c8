"""Run numba-cuda's own test suite with and without numba_cuda_launch imported
and fail if any test's outcome changes.

    .venv/bin/python ci/numba_cuda_suite.py --simulator          # CPU: the CUDA simulator suite
    .venv/bin/python ci/numba_cuda_suite.py --gpu                # GPU machine: the cudapy tests
    python3 ci/numba_cuda_suite.py --gpu --test-deps .whl/filecheck-*.whl .whl/suite/*.whl
                                                       # the same, offline, from wheels
    options: -n N (pytest-xdist workers), -k EXPR, --tests PKG_OR_MODULE ...,
             --shard K/N (the K-th of N parts of the selected modules),
             --test-deps SPEC ... (pip-installed into a temporary directory),
             --keep DIR (keep logs and per-test outcomes)

Importing the package must change nothing for code that does not launch
from CPU code, so numba-cuda's tests must end exactly as they do without it.
The suite is the one installed with numba-cuda (its wheel ships
``numba.cuda.tests``); it runs under pytest twice, in child processes whose
``sitecustomize`` imports ``numba_cuda_launch`` first in the second run (and
in every Python process the tests start). The package is this checkout's
(PYTHONPATH leads to it), which the runs check. Outcomes are compared per
test (passed, failed, error, skipped, xfailed, xpassed, and the warnings it
raised). A test whose outcome differs runs again in both configurations (up
to --reruns times); if it never ends the same way in both, the package
changed it: every such test is listed and the exit status is 1. Tests that
do end the same way once are reported as unstable, not as changes.

numba-cuda's test helpers import ``filecheck`` (and some test modules
``cffi`` and ``ml_dtypes``); the script stops if ``filecheck`` is missing,
and runs without workers if ``pytest-xdist`` is.
This file is also the pytest plugin of the runs (``-p numba_cuda_suite``).
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
PLUGIN = os.path.splitext(os.path.basename(__file__))[0]

# Imported by every Python process of a run (PYTHONPATH leads to it). numpy
# 2.5 removed np.row_stack, which numba-cuda 0.30.4 registers at import; the
# shim applies to both runs alike.
SITECUSTOMIZE = '''\
import os
import numpy as np
if not hasattr(np, "row_stack"):
    np.row_stack = np.vstack
if os.environ.get("NCL_SUITE_IMPORT") == "1":
    import numba_cuda_launch  # noqa: F401
'''

# The default selection of each mode, as subpackages of numba.cuda.tests.
# benchmarks/ is left out everywhere: it measures time (and needs
# pytest-benchmark), which says nothing about outcomes.
MODES = {
    "simulator": dict(env={"NUMBA_ENABLE_CUDASIM": "1"}, tests=None),
    "gpu": dict(env={}, tests=["cudapy"]),
}
EXCLUDED = {"benchmarks", "__pycache__", "data"}


# -- the pytest plugin (loaded in the child runs) --------------------------

_outcomes = {}


def _phase_outcome(report):
    if hasattr(report, "wasxfail"):
        return "xpassed" if report.passed else "xfailed"
    if report.when != "call" and report.failed:
        return "error"
    return report.outcome


def pytest_runtest_logreport(report):
    """Record each test's outcome: the first phase that did not pass decides
    (a failing teardown after a passing call is an error)."""
    outcome = _phase_outcome(report)
    entry = _outcomes.setdefault(report.nodeid, {"outcome": "passed", "detail": "",
                                                 "ncl": []})
    for name, value in report.user_properties:
        if name == "ncl_module" and value not in entry["ncl"]:
            entry["ncl"].append(value)
    if entry["outcome"] == "passed" and outcome != "passed":
        entry["outcome"] = outcome
        entry["detail"] = _detail(report)


def pytest_warning_recorded(warning_message, when, nodeid, location):
    """Record the warnings each test raised (category and where): one that
    appears only with the package imported is a change too."""
    if when != "runtest":
        nodeid = "<%s>" % when  # collection/configuration: one entry for all
    entry = _outcomes.setdefault(nodeid, {"outcome": "passed", "detail": "", "ncl": []})
    text = "%s at %s:%s" % (warning_message.category.__name__,
                            os.path.basename(warning_message.filename), warning_message.lineno)
    if text not in entry.setdefault("warnings", []):
        entry["warnings"].append(text)
        entry["warnings"].sort()


def pytest_collectreport(report):
    """A module that cannot be imported or is skipped as a whole counts as
    one test with that outcome."""
    if not report.passed:
        entry = _outcomes.setdefault(report.nodeid, {"ncl": []})
        entry.update(outcome="error" if report.failed else "skipped", detail=_detail(report))


def _detail(report):
    longrepr = report.longrepr
    if isinstance(longrepr, tuple):  # a skip: (file, line, reason)
        return str(longrepr[-1])[:300]
    lines = str(longrepr or "").splitlines()
    errors = [ln for ln in lines if ln.startswith("E ")] or lines[-1:]
    return errors[-1][:300] if errors else ""


def pytest_runtest_makereport(item, call):
    # Which numba_cuda_launch the test process had imported (None: none),
    # sent with the report so that the runs can be checked.
    if call.when == "setup":
        module = sys.modules.get("numba_cuda_launch")
        item.user_properties.append(
            ("ncl_module", getattr(module, "__file__", "?") if module else None))


def pytest_sessionfinish(session):
    path = os.environ.get("NCL_SUITE_RESULTS")
    if path and not hasattr(session.config, "workerinput"):  # the controller
        with open(path, "w") as f:
            json.dump(_outcomes, f, indent=0, sort_keys=True)


def _initialize_from_pytest_config(request):
    # numba-cuda's CUDATestCase uses this fixture (its repository's
    # testing/conftest.py defines it, which the wheel does not ship): it only
    # sets whether failed FileCheck reproducers are dumped.
    request.cls._dump_failed_filechecks = False


try:
    import pytest as _pytest

    initialize_from_pytest_config = _pytest.fixture(scope="class")(
        _initialize_from_pytest_config)
except ImportError:  # the script itself needs no pytest
    pass


# -- the script ------------------------------------------------------------


def _child_env(workdir, importing, extra_env, deps_dir):
    env = dict(os.environ)
    path = [workdir, HERE, ROOT] + ([deps_dir] if deps_dir else [])
    if env.get("PYTHONPATH"):
        path.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(path)
    env["NCL_SUITE_IMPORT"] = "1" if importing else "0"
    env.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
    env.update(extra_env)
    return env


def _probe(env):
    """The installed numba-cuda's version and test directory, which optional
    test dependencies are missing, and whether CUDA (or the simulator) works."""
    code = (
        "import importlib.util, json\n"
        "from importlib.metadata import version\n"
        "spec = importlib.util.find_spec('numba.cuda.tests')\n"
        "missing = [m for m in ('filecheck', 'cffi', 'ml_dtypes', 'xdist')\n"
        "           if importlib.util.find_spec(m) is None]\n"
        "from numba import cuda\n"
        "print(json.dumps([version('numba-cuda'),\n"
        "    spec and list(spec.submodule_search_locations or []), missing,\n"
        "    cuda.is_available()]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if out.returncode:
        sys.exit("cannot import numba.cuda:\n" + out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _selection(tests_dir, tests, shard):
    """Dotted names of the test packages or modules to run; with *shard*
    ``(k, n)`` the k-th of n interleaved parts of their modules."""
    if not tests:
        tests = [d for d in sorted(os.listdir(tests_dir))
                 if d not in EXCLUDED and os.path.isdir(os.path.join(tests_dir, d))
                 and any(f.startswith("test_") for f in os.listdir(os.path.join(tests_dir, d)))]
    if shard:
        modules = []
        for name in tests:
            path = os.path.join(tests_dir, *name.split("."))
            if os.path.isdir(path):
                modules += [name + "." + f[:-3] for f in sorted(os.listdir(path))
                            if f.startswith("test_") and f.endswith(".py")]
            else:
                modules.append(name)
        k, n = shard
        tests = modules[k - 1::n]
    return ["numba.cuda.tests." + t for t in tests]


def _pytest(env, workdir, rootdir, args, results, log, timeout):
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", PLUGIN,
           "-c", os.path.join(workdir, "pytest.ini"), "--rootdir", rootdir] + args
    env = dict(env, NCL_SUITE_RESULTS=results)
    t0 = time.time()
    with open(log, "w") as f:
        # its own process group, so that a timeout also ends xdist's workers
        proc = subprocess.Popen(cmd, env=env, cwd=workdir, stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            sys.exit("pytest ran past --timeout %d s (log: %s; --keep keeps it)" % (timeout, log))
    if not os.path.exists(results):
        with open(log) as f:
            tail = f.read()[-4000:]
        sys.exit("pytest (exit %d) wrote no results; log %s ends:\n%s"
                 % (proc.returncode, log, tail))
    with open(results) as f:
        return json.load(f), time.time() - t0


def _check_package(outcomes, importing):
    """Every test ran with this checkout's package imported, or with none."""
    seen = {m for entry in outcomes.values() for m in entry["ncl"]}
    if importing:
        wrong = {m for m in seen if m is None or not os.path.abspath(m).startswith(ROOT + os.sep)}
        if wrong or not seen:
            sys.exit("the run with the package imported saw numba_cuda_launch from %s, "
                     "not from %s" % (sorted(map(str, wrong)) or "nowhere", ROOT))
    elif seen - {None}:
        sys.exit("the plain run imported numba_cuda_launch (%s)" % sorted(seen - {None}))


def _counts(outcomes):
    counts = {}
    for nodeid, entry in outcomes.items():
        if nodeid[0] == "<":
            continue
        counts[entry["outcome"]] = counts.get(entry["outcome"], 0) + 1
    return ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items()))


def _result(entry, nodeid=""):
    """A test's outcome as compared: its outcome and the warnings it raised.
    Collection's own entry compares its outcome only: a module imported
    before pytest captures warnings (numba-cuda's, imported by the package
    in the second run) warns at import, outside collection, once per
    process: a collection with no entry is one that passed without a
    warning."""
    if nodeid[:1] == "<":
        return entry["outcome"] if entry is not None else "passed"
    if entry is None:
        return "absent"
    warned = entry.get("warnings")
    return entry["outcome"] + (" (warned: %s)" % "; ".join(warned) if warned else "")


def _differences(plain, imported):
    return [(nodeid, plain.get(nodeid), imported.get(nodeid))
            for nodeid in sorted(set(plain) | set(imported))
            if _result(plain.get(nodeid), nodeid) != _result(imported.get(nodeid), nodeid)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--simulator", action="store_true",
                      help="the CUDA simulator suite (NUMBA_ENABLE_CUDASIM=1), no GPU needed")
    mode.add_argument("--gpu", action="store_true", help="the cudapy GPU tests")
    parser.add_argument("--tests", nargs="+", metavar="NAME",
                        help="subpackages or modules of numba.cuda.tests to run "
                             "(default: all but benchmarks for --simulator, cudapy for --gpu)")
    parser.add_argument("-k", dest="keyword", help="pytest -k expression")
    parser.add_argument("--shard", metavar="K/N",
                        help="only the K-th of N interleaved parts of the selected test "
                             "modules (to split a run over several commands)")
    parser.add_argument("-n", dest="workers", type=int,
                        help="pytest-xdist workers per run (0: none; default 2 for "
                             "--simulator, up to 16 for --gpu)")
    parser.add_argument("--test-deps", nargs="+", metavar="SPEC",
                        help="pip-install these (names or wheel files) into a temporary "
                             "directory on the runs' PYTHONPATH, e.g. filecheck cffi")
    parser.add_argument("--reruns", type=int, default=3,
                        help="times a differing test runs again in each configuration "
                             "before it counts as changed (default 3)")
    parser.add_argument("--timeout", type=int, default=1800, help="seconds per run")
    parser.add_argument("--keep", metavar="DIR", help="keep logs and outcomes in DIR")
    args = parser.parse_args(argv)
    config = MODES["gpu" if args.gpu else "simulator"]

    workdir = tempfile.mkdtemp(prefix="ncl-suite-")
    try:
        return _run(args, config, workdir)
    finally:
        if args.keep:
            shutil.copytree(workdir, args.keep, dirs_exist_ok=True)
        shutil.rmtree(workdir, ignore_errors=True)


def _run(args, config, workdir):
    with open(os.path.join(workdir, "sitecustomize.py"), "w") as f:
        f.write(SITECUSTOMIZE)
    with open(os.path.join(workdir, "pytest.ini"), "w") as f:
        # numba_cuda/numba is a namespace package (numba-cuda's wheel puts
        # numba.cuda there and redirects the import).
        f.write("[pytest]\nconsider_namespace_packages = true\n")
    deps_dir = None
    if args.test_deps:
        deps_dir = os.path.join(workdir, "deps")
        offline = all(os.path.exists(s) for s in args.test_deps)
        out = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", deps_dir]
                             + (["--no-index", "--no-deps"] if offline else [])
                             + list(args.test_deps), capture_output=True, text=True)
        if out.returncode:
            sys.exit("pip install of the test dependencies failed:\n" + out.stderr[-3000:])

    plain_env = _child_env(workdir, False, config["env"], deps_dir)
    version, locations, missing, available = _probe(plain_env)
    if not available:
        sys.exit("no CUDA GPU here (or the driver cannot be used); --gpu needs one")
    if not locations:
        sys.exit("numba-cuda %s has no numba.cuda.tests package; get its sources for this "
                 "version (its GitHub tag; no sdists after 0.24)" % version)
    if "filecheck" in missing:
        sys.exit("numba-cuda's test helpers need filecheck: pass --test-deps filecheck "
                 "(or a filecheck wheel)")
    shard = tuple(int(x) for x in args.shard.split("/")) if args.shard else None
    selection = _selection(locations[0], args.tests or config["tests"], shard)
    # Test ids relative to the directory holding numba/cuda/tests: unique,
    # and paths that select the test again.
    rootdir = os.path.dirname(os.path.dirname(os.path.dirname(locations[0])))
    pytest_args = ["--pyargs"] + selection
    if args.keyword:
        pytest_args += ["-k", args.keyword]
    workers = args.workers if args.workers is not None else \
        min(16, os.cpu_count() or 1) if args.gpu else 2
    if workers and "xdist" in missing:
        print("pytest-xdist is missing: one process per run")
        workers = 0
    if workers:
        # loadscope keeps a test class on one worker, as CUDATestCase needs.
        pytest_args += ["-n", str(workers), "--dist", "loadscope"]
    print("numba-cuda %s, %s; %s" % (version, "simulator" if args.simulator else "GPU",
                                      " ".join(s.split(".", 3)[-1] for s in selection))
          + ("; -k %s" % args.keyword if args.keyword else "")
          + ("; without %s (tests needing it fail alike in both runs)"
             % ", ".join(m for m in missing if m != "xdist")
             if set(missing) - {"xdist"} else ""), flush=True)

    runs = {}
    for label, importing in (("plain", False), ("imported", True)):
        env = _child_env(workdir, importing, config["env"], deps_dir)
        outcomes, seconds = _pytest(env, workdir, rootdir, pytest_args,
                                    os.path.join(workdir, label + ".json"),
                                    os.path.join(workdir, label + ".log"), args.timeout)
        _check_package(outcomes, importing)
        runs[label] = outcomes
        print("%-8s %.0f s: %s" % (label, seconds, _counts(outcomes)), flush=True)
    tests = [nodeid for nodeid in runs["plain"] if nodeid[0] != "<"]
    if not tests:
        sys.exit("no tests ran")

    diffs = _differences(runs["plain"], runs["imported"])
    # A change is an outcome the package decides. numba-cuda has tests whose
    # outcome varies from run to run (the simulator's print tests race its
    # threads), so differing tests run again, one process per configuration,
    # up to --reruns times: a test that ends the same way in both
    # configurations at least once is unstable, not changed. Warnings raised
    # outside tests cannot be selected again and count as they are.
    seen = {nodeid: ({_result(a)}, {_result(b)}) for nodeid, a, b in diffs}
    pending = [nodeid for nodeid in seen if nodeid[0] != "<"]
    for round_ in range(args.reruns):
        if not pending:
            break
        paths = [os.path.join(rootdir, nodeid) for nodeid in pending]
        for i, (label, importing) in enumerate((("plain", False), ("imported", True))):
            env = _child_env(workdir, importing, config["env"], deps_dir)
            again, _ = _pytest(env, workdir, rootdir, ["-p", "no:xdist"] + paths,
                               os.path.join(workdir, "%s-again%d.json" % (label, round_)),
                               os.path.join(workdir, "%s-again%d.log" % (label, round_)),
                               args.timeout)
            for nodeid in pending:
                if nodeid in again:
                    seen[nodeid][i].add(_result(again[nodeid]))
        pending = [nodeid for nodeid in pending if not seen[nodeid][0] & seen[nodeid][1]]
    changed = 0
    for nodeid, a, b in diffs:
        plain, imported = seen[nodeid]
        if plain & imported:
            print("UNSTABLE %s: %s without numba_cuda_launch, %s with it, when run again: %s"
                  % (nodeid, _result(a), _result(b), " / ".join(sorted(plain & imported))))
            continue
        changed += 1
        print("CHANGED %s: %s without numba_cuda_launch, %s with it" % (
            nodeid, " / ".join(sorted(plain)), " / ".join(sorted(imported))))
        for label, entry in (("without", a), ("with", b)):
            if entry and entry.get("detail"):
                print("    %s: %s" % (label, entry["detail"]))
    if changed:
        print("%d of %d tests change outcome when numba_cuda_launch is imported"
              % (changed, len(tests)))
        return 1
    print("%d tests, outcomes identical with and without numba_cuda_launch (%s)%s"
          % (len(tests), _counts(runs["plain"]),
             "; %d unstable (listed above)" % len(diffs) if diffs else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
