"""``typeof`` of objects whose class Numba has no typing for: the function
given to :func:`type_unknown_objects_with` (device arrays, stream objects) is
asked before Numba's entry for ``object``, whose buffer-protocol attempt some
device arrays refuse with an error (installed by :mod:`.overrides`).
"""

__all__ = ["type_unknown_objects_with", "typing_unknown_objects"]

_typer = None  # fn(value) -> numba type or None


def type_unknown_objects_with(fn):
    """Ask ``fn(value)`` for the type of objects of classes Numba has no
    typing for, before Numba's generic typing (None from *fn*: Numba's)."""
    global _typer
    _typer = fn


def typing_unknown_objects(original):
    """The ``typeof_impl`` entry for ``object``: the registered function,
    then *original* (Numba's entry)."""
    def _typeof_any(val, c):
        ty = None if _typer is None else _typer(val)
        return ty if ty is not None else original(val, c)
    return _typeof_any
