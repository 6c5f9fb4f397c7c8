"""The releases of Numba, numba-cuda and numba-cuda-mlir this package was
checked against, and the check ``import numba_cuda_launch`` makes: older than
supported is an ImportError, a newer release line a RuntimeWarning
(docs/overrides.md, ci/matrix.json).
"""

import warnings
from importlib import metadata


from numba_cuda_launch.compat.simulator import refuse_builtin_cuda

__all__ = ["SUPPORTED", "check_versions", "check_version"]

#: distribution -> (oldest supported, newest checked) release.
SUPPORTED = {
    "numba": ("0.62.1", "0.68.1"),
    "numba-cuda": ("0.26.0", "0.30.4"),
    "numba-cuda-mlir": ("0.6.0", "0.6.0"),
}
_OPTIONAL = {"numba-cuda-mlir"}


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


def check_versions():
    """Refuse numba's built-in CUDA target, then check numba, numba-cuda and
    (when installed) numba-cuda-mlir against :data:`SUPPORTED`."""
    refuse_builtin_cuda()
    for distribution in SUPPORTED:
        installed = installed_version(distribution)
        if installed is None and distribution in _OPTIONAL:
            continue
        check_version(distribution, installed)
