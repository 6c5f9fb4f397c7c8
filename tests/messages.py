"""Reading error messages in tests."""

import re


def first_line(exc):
    """The first line of a Numba error after its pipeline header (without
    the terminal highlighting Numba adds where colour is available)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[1] if lines[0].startswith("Failed in") else lines[0]
