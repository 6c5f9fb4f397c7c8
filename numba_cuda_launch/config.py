"""Which GPU architecture kernel images are built for when no GPU is present.

With a GPU, images are built for the current device, exactly as numba-cuda
builds them for a Python launch (so the two share one compilation). With no
GPU or driver, set a compute capability with :func:`set_compute_capability`
or the environment variable ``NUMBA_CUDA_LAUNCH_CC`` (``"9.0"``); the image
then loads only on devices of that architecture family.
"""

import os

__all__ = ["set_compute_capability", "get_compute_capability"]

_configured = None


def _parse(value):
    if isinstance(value, str):
        major, _, minor = value.strip().partition(".")
        value = (int(major), int(minor or 0))
    major, minor = (int(v) for v in value)
    if major < 3 or minor < 0:
        raise ValueError("not a compute capability: %r" % (value,))
    return (major, minor)


def set_compute_capability(cc):
    """Build kernel images for compute capability *cc* (e.g. ``(9, 0)`` or
    ``"9.0"``) when no GPU is present; ``None`` clears the setting."""
    global _configured
    _configured = None if cc is None else _parse(cc)


def get_compute_capability():
    """The configured compute capability, or None (then a GPU is needed)."""
    if _configured is not None:
        return _configured
    env = os.environ.get("NUMBA_CUDA_LAUNCH_CC")
    return _parse(env) if env else None
