"""Reading error messages in tests."""

import re


def first_line(exc):
    """The first line of an error's message, as the user reads it (without
    the terminal highlighting Numba adds where colour is available)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    return text.split("\n", 1)[0].strip()
