"""Numba's extension API as type checkers see the package's public functions.

``register_jitable`` gives back the function it registers; on a Numba
without type hints (before 0.68) a checker would see every public function
it decorates as ``Any``, so its typed signature is declared here for
checkers only (runtime: Numba's own). docs/architecture.md, "Type hints".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

__all__ = ["Function", "register_jitable"]

#: A function whose signature a decorator keeps.
Function = TypeVar("Function", bound=Callable[..., Any])

if TYPE_CHECKING:
    def register_jitable(fn: Function) -> Function:
        """Numba's ``register_jitable``: *fn*, callable from nopython code."""
else:
    from numba.extending import register_jitable
