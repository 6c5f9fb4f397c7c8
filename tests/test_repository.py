"""The repository holds the project's sources, not third-party binaries: the
numba-cuda-mlir wheel's tree that ci/repack_mlir_wheel.sh writes to
.whl-mlir/ (45 MiB) and the wheels carried to the GPU machine (.whl/) are
ignored by git, and no tracked file is an archive or larger than 1 MiB."""

import os
import shutil
import subprocess

import pytest

from support import ROOT

pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not os.path.exists(os.path.join(ROOT, ".git")),
    reason="a git checkout (an sdist has no repository to check)")

ARCHIVES = (".whl", ".tar", ".tar.xz", ".tar.gz", ".tgz", ".zip", ".xz", ".so", ".a", ".o")


def _git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout


def test_no_tracked_archive_or_large_file():
    tracked = _git("ls-tree", "-r", "-z", "--name-only", "HEAD").split("\0")
    archives = [p for p in tracked if p.endswith(ARCHIVES)]
    assert archives == [], "archives or binaries tracked: %s" % archives
    large = [(p, os.path.getsize(os.path.join(ROOT, p))) for p in tracked
             if p and os.path.isfile(os.path.join(ROOT, p))
             and os.path.getsize(os.path.join(ROOT, p)) > 1 << 20]
    assert large == [], "files over 1 MiB tracked: %s" % large


@pytest.mark.parametrize("path", [
    ".whl-mlir/numba_cuda_mlir-0.6.0-cp312-cp312-manylinux_2_28_x86_64.tar.xz",
    ".whl/numpy-2.4.0-cp312-cp312-manylinux_2_28_x86_64.whl",
])
def test_what_the_ci_scripts_make_is_ignored(path):
    # git check-ignore exits 0 and names the path when a rule ignores it
    done = subprocess.run(["git", "check-ignore", "--no-index", path], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip() == path, done
