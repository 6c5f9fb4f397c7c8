"""Which GPU architecture kernel images are built for when no GPU is present.

With a GPU, images are built for the current device, exactly as numba-cuda
builds them for a Python launch (so the two share one compilation). With no
GPU or driver, set a compute capability with :func:`set_compute_capability`
or the environment variable ``NUMBA_CUDA_LAUNCH_CC``; the image then loads
only on devices of that architecture family. Spellings accepted: ``(9, 0)``,
``"9.0"``, ``"9,0"``, ``"90"``, ``"sm_90"``, ``"compute_90"``.
"""

import numbers
import os
import re

__all__ = ["set_compute_capability", "get_compute_capability"]

ENV_VAR = "NUMBA_CUDA_LAUNCH_CC"
_configured = None
_SPELLINGS = "(9, 0), '9.0', '9,0', '90' or 'sm_90'"


def _parse(value, source):
    """``(major, minor)`` from one of the accepted spellings; ValueError
    naming *source* (where the value came from) otherwise."""
    def refuse(why=""):
        raise ValueError("%s: %r is not a compute capability%s; write it as %s"
                         % (source, value, why, _SPELLINGS))

    if isinstance(value, str):
        text = value.strip().lower()
        m = (re.fullmatch(r"(\d+)\s*[.,]\s*(\d+)", text)
             or re.fullmatch(r"(?:sm_|compute_)?(\d+?)(\d)", text))
        if m is None:
            if re.fullmatch(r"(?:sm_|compute_)?\d+[af]", text):
                refuse(" here (architecture-specific targets such as sm_90a are not built: "
                       "images are built as numba-cuda builds them, for sm_XY)")
            refuse()
        major, minor = int(m.group(1)), int(m.group(2))
    elif isinstance(value, (tuple, list)):
        if len(value) != 2 or not all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                      for v in value):
            refuse(" (a tuple of two integers is needed)")
        major, minor = (int(v) for v in value)
    else:
        refuse(" (floats are ambiguous: 8.10 reads as 8.1)" if isinstance(value, float)
               else "")
    if major < 3 or minor < 0 or minor > 9:
        refuse()
    return (major, minor)


def set_compute_capability(cc: "tuple[int, int] | list[int] | str | None") -> None:
    """Build kernel images for compute capability *cc* (``(9, 0)``,
    ``"9.0"``, ``"90"``, ``"sm_90"``) when no GPU is present; ``None`` clears
    the setting. Raises ValueError for anything else."""
    global _configured
    _configured = None if cc is None else _parse(cc, "set_compute_capability()")


def get_compute_capability() -> "tuple[int, int] | None":
    """The configured compute capability, or None (then a GPU is needed).
    A malformed ``NUMBA_CUDA_LAUNCH_CC`` raises ValueError naming it."""
    if _configured is not None:
        return _configured
    env = os.environ.get(ENV_VAR, "").strip()
    return _parse(env, ENV_VAR) if env else None
