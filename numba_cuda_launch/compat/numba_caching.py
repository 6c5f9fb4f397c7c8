"""Numba's on-disk cache (``cache=True``) and code that launches kernels.

Numba keys cached code on the function's source, its signature and the CPU;
code that launches kernels also depends on the launch target it was built
for (the simulator, or the GPU architecture of the images it carries), which
is not in that key. Compiled launch code therefore registers a check that
Numba runs when it loads the code from the cache (a ``reload_init`` hook of
the compiled library, the mechanism Numba uses itself for parfors). A check
that finds another target raises :class:`LaunchTargetChanged`, which the
patch below turns into a cache miss: the function is compiled again for this
target and the cache entry replaced. Checked with numba 0.62 to 0.68.
"""

import functools

__all__ = ["LaunchTargetChanged", "install_cache_target_check", "add_reload_check"]


class LaunchTargetChanged(Exception):
    """Cached launch code was built for another launch target."""


@functools.cache
def install_cache_target_check():
    """Make :class:`LaunchTargetChanged` raised while Numba loads a cached
    overload a cache miss instead of an error."""
    from numba.core.caching import Cache

    original = Cache.load_overload

    def load_overload(self, sig, target_context):
        try:
            return original(self, sig, target_context)
        except LaunchTargetChanged:
            return None

    Cache.load_overload = load_overload


def add_reload_check(context, check):
    """Register *check* (a picklable, hashable callable) to run when the
    function being lowered in *context* is loaded from Numba's cache."""
    context.active_code_library._reload_init.add(check)
