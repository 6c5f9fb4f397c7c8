"""Which GPU architecture kernel images are built for.

With a GPU, images are built for the current device, as numba-cuda builds
them for a Python launch; with none, for the compute capability set with
:func:`set_compute_capability` or ``NUMBA_CUDA_LAUNCH_CC``. A list of them asks
for portable images, with or without a GPU (docs/architecture.md, "Images for
several architectures"; accepted spellings: docs/reliability.md).
"""

from __future__ import annotations

import numbers
import os
import re
from collections.abc import Sequence
from typing import Any, NoReturn, TypeAlias, Union

__all__ = ["set_compute_capability", "get_compute_capability", "get_compute_capabilities",
           "parse_setting", "setting"]

#: One compute capability: ``(9, 0)``, ``"9.0"``, ``"sm_90"``, ...
ComputeCapability: TypeAlias = Union[tuple[int, int], str]
#: A list of them (portable images: cubins for each, PTX of the lowest), or
#: one written as a list (``[9, 0]``): the setting's parser tells them apart.
ComputeCapabilities: TypeAlias = Sequence[Union[int, ComputeCapability, Sequence[int]]]
#: What the setting holds: one, or the sorted tuple of a list.
Setting: TypeAlias = Union[tuple[int, int], tuple[tuple[int, int], ...]]

ENV_VAR = "NUMBA_CUDA_LAUNCH_CC"
_configured: Setting | None = None
_SPELLINGS = "(9, 0), '9.0', '9,0', '90' or 'sm_90'"
_SEPARATORS = re.compile(r"[\s;]+")
# CUDA names architectures sm_<major><minor> with a one-digit minor; the
# oldest any CUDA 12 or 13 toolkit builds for is 3.x, and no major has more
# than two digits (12.x is the newest today).
_MAJOR = (3, 99)


def _parse(value: object, source: str) -> tuple[int, int]:
    """``(major, minor)`` from one of the accepted spellings; ValueError
    naming *source* (where the value came from) otherwise."""
    def refuse(why: str = "") -> NoReturn:
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
    if not (_MAJOR[0] <= major <= _MAJOR[1] and 0 <= minor <= 9):
        refuse(" (compute capabilities are %d.0 to %d.9: a major version of %d to %d and a "
               "minor of 0 to 9)" % (_MAJOR[0], _MAJOR[1], *_MAJOR))
    return (major, minor)


def _parse_list(values: list[object], source: str) -> tuple[tuple[int, int], ...]:
    """The sorted tuple of the compute capabilities listed in *values*;
    ValueError naming *source* for an empty list, a duplicate or an item
    that is not a compute capability."""
    if not values:
        raise ValueError("%s: an empty list names no architecture; give one or more "
                         "compute capabilities, such as [(8, 0), (9, 0)]" % source)
    ccs = []
    for i, value in enumerate(values):
        if isinstance(value, (tuple, list, str)):
            cc = _parse(value, "%s: item %d" % (source, i))
        else:
            raise ValueError("%s: item %d, %r, is not a compute capability; each item of a "
                             "list is written as %s" % (source, i, value, _SPELLINGS))
        if cc in ccs:
            raise ValueError("%s: compute capability %d.%d is listed twice" % ((source,) + cc))
        ccs.append(cc)
    return tuple(sorted(ccs))


def _is_list(value: object) -> bool:
    """A list of compute capabilities, not one written as ``[9, 0]`` (nor a
    malformed one, ``(9,)``)."""
    return isinstance(value, (list, tuple)) and (
        not value or not all(isinstance(v, numbers.Integral) for v in value))


def parse_setting(value: Any, source: str) -> Setting:
    """``(major, minor)`` for one compute capability, or a sorted tuple of
    them for a list (a Python list or tuple of spellings, or a string of
    spellings separated by spaces or semicolons, ``"sm_80;"`` a list of
    one); ValueError naming *source* otherwise."""
    if isinstance(value, str) and _SEPARATORS.search(value.strip()):
        try:
            return _parse(value, source)  # "9, 0" is one
        except ValueError:
            # "8.0 9.0"; "sm_80;" is a list of one
            return _parse_list([v for v in _SEPARATORS.split(value.strip()) if v], source)
    if _is_list(value):
        return _parse_list(list(value), source)
    return _parse(value, source)


def set_compute_capability(cc: ComputeCapability | ComputeCapabilities | None) -> None:
    """Store the setting *cc*, one compute capability or a list (``None``
    clears it; ValueError for anything else). The public
    :func:`numba_cuda_launch.set_compute_capability` also checks the toolkit."""
    global _configured
    _configured = None if cc is None else parse_setting(cc, "set_compute_capability()")


# (the variable's text, its setting): parsed once per value
_env_read: tuple[str, Setting | None] = ("", None)


def setting() -> Setting | None:
    """The setting in force: one compute capability, a sorted tuple of
    them, or None. A malformed ``NUMBA_CUDA_LAUNCH_CC`` raises ValueError
    naming it."""
    global _env_read
    if _configured is not None:
        return _configured
    env = os.environ.get(ENV_VAR, "").strip()
    if env != _env_read[0]:
        _env_read = (env, parse_setting(env, ENV_VAR) if env else None)
    return _env_read[1]


def get_compute_capability() -> tuple[int, int] | None:
    """The configured compute capability (the lowest, for a list), or None
    (then a GPU is needed). A malformed ``NUMBA_CUDA_LAUNCH_CC`` raises
    ValueError naming it."""
    current = setting()
    return current[0] if current is not None and isinstance(current[0], tuple) else current


def get_compute_capabilities() -> tuple[tuple[int, int], ...] | None:
    """The architectures portable images are built for (sorted), when a
    list is configured; None otherwise (images are then one cubin)."""
    current = setting()
    return current if current is not None and isinstance(current[0], tuple) else None
