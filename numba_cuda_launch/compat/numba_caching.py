"""Numba's on-disk cache (``cache=True``) and code that launches kernels.

Such code depends on the launch target it was built for (the simulator, the
architecture of its images), which Numba's cache key lacks: lowering adds a
check to the code library, pickled into the compile result's
``reload_init`` (as Numba does for parfors); a check that finds another
target raises :class:`LaunchTargetChanged`, a cache miss. (Under the
simulator the index key has one item more: :mod:`.simulator`.)
"""

__all__ = ["LaunchTargetChanged", "target_checking_load_overload", "checks_carrying_reduce",
           "add_reload_checks", "has_reload_checks", "CHECKS"]


class LaunchTargetChanged(Exception):
    """Cached launch code was built for another launch target."""


#: The attribute of Numba's code libraries holding their checks (declared in
#: :mod:`.overrides`).
CHECKS = "_numba_cuda_launch_reload_checks"
_RELOAD_INIT = 7  # index of reload_init in CompileResult._reduce()'s tuple


def target_checking_load_overload(original):
    """``Cache.load_overload``: :class:`LaunchTargetChanged` raised while
    Numba loads a cached overload is a cache miss instead of an error; a
    loaded overload's checks are put back on its library, for callers
    linking it."""
    def load_overload(self, sig, target_context):
        try:
            cres = original(self, sig, target_context)
        except LaunchTargetChanged:
            return None
        if cres is not None:
            ours = {c for c in (getattr(cres, "reload_init", None) or ()) if _is_ours(c)}
            if ours:
                _checks_of(cres.library).update(ours)
        return cres
    return load_overload


def checks_carrying_reduce(original):
    """``CompileResult._reduce``: the checks of the library and of the
    libraries it links to are added to the pickled ``reload_init``."""
    def _reduce(self):
        data = original(self)
        checks = _library_checks(self.library, set())
        if not checks:
            return data
        reload_init = list(data[_RELOAD_INIT] or ())
        reload_init += [c for c in checks if c not in reload_init]
        return data[:_RELOAD_INIT] + (reload_init,) + data[_RELOAD_INIT + 1:]
    return _reduce


def _library_checks(library, seen):
    """The checks of *library* and of the libraries it links to (*seen*:
    ids of the libraries already visited), in the order found."""
    checks, stack = [], [library]
    while stack:
        lib = stack.pop()
        if id(lib) in seen:
            continue
        seen.add(id(lib))
        checks += [c for c in getattr(lib, CHECKS, ()) if c not in checks]
        stack.extend(reversed(getattr(lib, "_linking_libraries", ())))
    return checks


def add_reload_checks(context, checks):
    """Register *checks* (picklable, hashable callables) to run when the
    function being lowered in *context* is loaded from Numba's cache."""
    _checks_of(context.active_code_library).update(checks)


def _checks_of(library):
    checks = getattr(library, CHECKS, None)
    if checks is None:
        checks = set()
        setattr(library, CHECKS, checks)
    return checks


def _is_ours(check):
    module = getattr(type(check), "__module__", "") or ""
    return module.startswith(("numba_cuda_launch", "numba.cuda.cpu_launch"))


def has_reload_checks(cres):
    """Whether compile result *cres* carries checks of this package (it, or
    a function it calls, launches kernels or calls the driver), compiled now
    or loaded from the cache."""
    if _library_checks(cres.library, set()):
        return True
    return any(_is_ours(c) for c in (getattr(cres, "reload_init", None) or ()))
