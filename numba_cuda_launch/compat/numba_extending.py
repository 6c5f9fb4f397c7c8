"""Numba's extension API as type checkers see the package's public functions.

``register_jitable`` gives back the function it registers; on a Numba
without type hints (before 0.68) a checker would see every public function
it decorates as ``Any``, so its typed signature is declared here for
checkers only (runtime: Numba's own). docs/architecture.md, "Type hints".
:func:`cached_jitable` is ``register_jitable`` with Numba's on-disk cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, TypeVar

__all__ = ["Function", "register_jitable", "cacheable", "cached_jitable",
           "refresh_cpu_contexts"]

#: A function whose signature a decorator keeps.
Function = TypeVar("Function", bound=Callable[..., Any])

if TYPE_CHECKING:
    def register_jitable(fn: Function) -> Function:
        """Numba's ``register_jitable``: *fn*, callable from nopython code."""
else:
    from numba.extending import register_jitable


_CACHEABLE: dict[str, bool] = {}  # source file -> whether Numba finds a cache directory


def cacheable(fn: Callable[..., Any]) -> bool:
    """Whether Numba finds a cache directory for *fn*'s source file
    (without one, ``cache=True`` fails its first compilation)."""
    import inspect

    from numba.core.caching import CompileResultCacheImpl

    try:
        path = inspect.getfile(fn)
    except TypeError:
        return False
    if path not in _CACHEABLE:
        try:
            CompileResultCacheImpl(fn)
            _CACHEABLE[path] = True
        except (RuntimeError, OSError):
            _CACHEABLE[path] = False
    return _CACHEABLE[path]


# Called from nopython code only: no wrappers for Python or C callers, whose
# lowering and machine code were most of each small function's compile
_CALLEE_ONLY = {"no_cpython_wrapper": True, "no_cfunc_wrapper": True}


def cached_jitable(fn: Function) -> Function:
    """``register_jitable`` whose compiled code Numba keeps in its on-disk
    cache (``cache=True``), so that a later process loads it instead of
    compiling it: for the package's functions every ``jax_kernel`` handler
    calls (the XLA frame's readers and checks), whose compilation is most
    of a first handler's. Keyed by the package's build besides Numba's key
    (:func:`.numba_caching.build_keyed_index_key`); not cached where no
    cache directory can be found."""
    from numba.extending import register_jitable as _register

    if not cacheable(fn):
        return _register(**_CALLEE_ONLY)(fn)
    return _register(cache=True, **_CALLEE_ONLY)(fn)


def refresh_cpu_contexts() -> None:
    """Make registrations made since Numba's CPU typing and target contexts
    were created reach them (a module imported on demand while a function is
    being typed: Numba refreshes its contexts when a compilation starts, not
    in the middle of one). Contexts not created yet are left alone: they
    load every registration when they are."""
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.registry import cpu_target

    made = vars(cpu_target)  # functools.cached_property keeps them here (numba 0.62-0.68)
    with global_compiler_lock:  # re-entrant: held already when asked while typing
        for name in ("_toplevel_typing_context", "_toplevel_target_context"):
            if name in made:
                made[name].refresh()
