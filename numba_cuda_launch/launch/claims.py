"""Registries of things that claim objects: launch backends claim compiled
kernels, kernel kinds claim kernel objects. The latest registration is asked
first, so a more specific one registered later takes precedence."""

__all__ = ["ClaimRegistry"]


class ClaimRegistry:
    """Items with a ``claims(obj)`` method, asked newest first."""

    def __init__(self, what, default=None):
        self._items = []
        self._what = what
        self._default = default

    def register(self, item):
        """Add *item*; it is asked before those registered earlier."""
        self._items.insert(0, item)
        return item

    def find(self, obj):
        """The first item claiming *obj*, else the default (LookupError when
        there is none)."""
        for item in self._items:
            if item.claims(obj):
                return item
        if self._default is None:
            raise LookupError("no %s for %r" % (self._what, obj))
        return self._default
