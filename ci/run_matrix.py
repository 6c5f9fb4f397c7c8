"""Run the CPU test suite in a fresh virtual environment per combination of
ci/matrix.json, printing one line per combination.

    .venv/bin/python ci/run_matrix.py [--only NAME ...] [--keep] [--results FILE]

A combination whose Python is not installed here is reported as skipped.
Exit status is non-zero if any combination that ran failed.
"""

import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def find_python(version):
    """An interpreter of *version*: this one, a pyenv installation, or one on
    the PATH that runs."""
    if sys.version_info[:2] == tuple(int(v) for v in version.split(".")):
        return sys.executable
    candidates = sorted(glob.glob(os.path.expanduser(
        "~/.pyenv/versions/%s.*/bin/python%s" % (version, version))), reverse=True)
    if shutil.which("python" + version):
        candidates.append(shutil.which("python" + version))
    for exe in candidates:
        if run([exe, "-c", "import venv"]).returncode == 0:
            return exe
    return None


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def run_combination(combo, workdir, keep):
    python = find_python(combo["python"])
    if python is None:
        return "skipped", "python%s not installed" % combo["python"], 0.0
    t0 = time.time()
    venv = os.path.join(workdir, combo["name"])
    out = run([python, "-m", "venv", venv])
    if out.returncode:
        return "error", out.stderr[-500:], time.time() - t0
    pip = [os.path.join(venv, "bin", "python"), "-m", "pip", "install", "-q"]
    spec = "%s[%s]" % (ROOT, combo["extras"])
    pins = ["numba==%s" % combo["numba"]]
    if combo["numba-cuda"]:  # None: an installation without numba-cuda
        pins.append("numba-cuda==%s" % combo["numba-cuda"])
    out = run(pip + [spec] + pins)
    if out.returncode == 0 and not combo["numba-cuda"]:
        check = run([os.path.join(venv, "bin", "python"), "-m", "pip", "show", "numba-cuda"])
        if check.returncode == 0:
            return "install failed", "numba-cuda was installed", time.time() - t0
    if out.returncode:
        return "install failed", out.stderr[-800:], time.time() - t0
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    out = run([os.path.join(venv, "bin", "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider",
               "-n", "2", os.path.join(ROOT, "tests")], cwd=ROOT, env=env)
    summary = (out.stdout.strip().splitlines() or [""])[-1]
    if not keep:
        shutil.rmtree(venv, ignore_errors=True)
    status = "passed" if out.returncode == 0 else "failed"
    detail = summary if status == "passed" else out.stdout[-2000:]
    return status, detail, time.time() - t0


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--only", nargs="*")
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--results")
    args = parser.parse_args()
    with open(os.path.join(ROOT, "ci", "matrix.json")) as f:
        combos = json.load(f)["combinations"]
    if args.only:
        combos = [c for c in combos if c["name"] in args.only]
    workdir = tempfile.mkdtemp(prefix="ncl-matrix-")
    results, failed = [], False
    for combo in combos:
        status, detail, seconds = run_combination(combo, workdir, args.keep)
        failed |= status in ("failed", "install failed", "error")
        line = "%-14s python %-5s numba %-7s numba-cuda %-7s [%s]: %s (%.0f s) %s" % (
            combo["name"], combo["python"], combo["numba"], combo["numba-cuda"] or "-",
            combo["extras"], status, seconds,
            re.sub(r"\s+", " ", detail)[-160:] if status != "failed" else "")
        print(line, flush=True)
        if status == "failed":
            print(detail, flush=True)
        results.append(dict(combo, status=status, seconds=round(seconds), detail=detail[-300:]))
    if args.results:
        with open(args.results, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
