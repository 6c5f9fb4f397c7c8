"""The releases of Numba, numba-cuda and numba-cuda-mlir this package was
checked against, which kernel compilers are installed, and the check
``import numba_cuda_launch`` makes: no kernel compiler or one older than
supported is an ImportError, a newer release line a RuntimeWarning
(docs/overrides.md, docs/matrix.md, ci/matrix.json). Installed means the
distribution's metadata is there: nothing is imported to find out.
"""

import functools
import sys
import warnings
from importlib import metadata

__all__ = ["SUPPORTED", "COMPILERS", "check_versions", "check_version", "installed_version",
           "has_numba_cuda", "numba_cuda_imported", "has_numba_cuda_mlir"]

#: distribution -> (oldest supported, newest checked) release.
SUPPORTED = {
    "numba": ("0.62.1", "0.68.1"),
    "numba-cuda": ("0.26.0", "0.30.4"),
    "numba-cuda-mlir": ("0.6.0", "0.6.0"),
}
#: The kernel compilers, each optional; at least one must be installed.
COMPILERS = ("numba-cuda", "numba-cuda-mlir")
#: What installs each compiler (the package's extras; README.md, "numba-cuda or numba-cuda-mlir").
_EXTRA = {"numba-cuda": 'pip install "numba-cuda-launch[cu13]" (or [cu12])',
          "numba-cuda-mlir": 'pip install "numba-cuda-launch[mlir]"'}


def _vtuple(text):
    parts = []
    for piece in text.split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


def check_version(distribution, installed):
    """Apply the rule to *installed*, the version of *distribution* (None: not installed) (a key
    of :data:`SUPPORTED`): ImportError if older than supported, a
    RuntimeWarning if its release line (major.minor) is newer than the
    newest checked one; a newer patch release of a checked line passes."""
    oldest, newest = SUPPORTED[distribution]
    if installed is None:
        raise ImportError("numba_cuda_launch needs %s %s to %s; it is not installed"
                          % (distribution, oldest, newest))
    if _vtuple(installed) < _vtuple(oldest):
        raise ImportError(
            "numba_cuda_launch supports %s %s to %s; %s is installed"
            % (distribution, oldest, newest, installed))
    if _vtuple(installed)[:2] > _vtuple(newest)[:2]:
        warnings.warn(
            "numba_cuda_launch was checked with %s up to %s; %s is installed"
            % (distribution, newest, installed),
            RuntimeWarning,
            stacklevel=4,
        )


def installed_version(distribution):
    """The installed version of *distribution*, or None (not installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=None)
def _installed(distribution):
    return installed_version(distribution) is not None


def has_numba_cuda() -> bool:
    """Whether numba-cuda (NVIDIA's ``numba.cuda``) is installed; without
    it ``numba.cuda`` is never imported (numba's own is deprecated)."""
    return _installed("numba-cuda")


def numba_cuda_imported() -> bool:
    """Whether numba-cuda is installed and ``numba.cuda`` imported (by the
    user, or for the simulator): until then nothing of it is asked."""
    return "numba.cuda" in sys.modules and has_numba_cuda()


def has_numba_cuda_mlir() -> bool:
    """Whether numba-cuda-mlir is installed."""
    return _installed("numba-cuda-mlir")


def check_versions():
    """Check numba and each installed kernel compiler against
    :data:`SUPPORTED`; ImportError, saying what to install, when no kernel
    compiler is installed."""
    check_version("numba", installed_version("numba"))
    found = [(d, installed_version(d)) for d in COMPILERS]
    if all(v is None for _, v in found):
        raise ImportError(
            "numba_cuda_launch needs a CUDA kernel compiler for Numba, numba-cuda-mlir or "
            "numba-cuda; neither is installed. Install one: %s, or %s"
            % (_EXTRA["numba-cuda-mlir"], _EXTRA["numba-cuda"]))
    for distribution, installed in found:
        if installed is not None:
            check_version(distribution, installed)
