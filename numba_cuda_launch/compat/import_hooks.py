"""Callbacks run right after a module is imported, whoever imports it and
whenever: the package extends modules it does not import itself
(numba-cuda-mlir, which the user imports; Numba's ``numba.core.boxing``,
imported at a first compilation) at the moment they exist, before anything
uses them. One ``sys.meta_path`` finder per awaited module finds it as the
other finders do and runs the module, then the callbacks.
docs/overrides.md.
"""

import importlib.abc
import importlib.util
import sys
import warnings
from typing import Callable, Dict, List

__all__ = ["when_imported"]

#: module name -> the callbacks run once it is imported
_AWAITED: Dict[str, List[Callable[[], None]]] = {}


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds module *name* as the other finders do, with a loader that runs
    the module, then its callbacks."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        sys.meta_path.remove(self)  # once: the other finders find the module
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            exec_module = spec.loader.exec_module

            def run_then_call_back(module):
                exec_module(module)
                _call_back(name)
            spec.loader.exec_module = run_then_call_back  # type: ignore[method-assign]
        return spec


def _call_back(name):
    for callback in list(_AWAITED.get(name, ())):
        try:
            callback()
        except Exception as exc:  # the user's import goes on; what needs the callback fails
            warnings.warn("numba_cuda_launch could not extend %s: %s: %s"
                          % (name, type(exc).__name__, exc), RuntimeWarning, stacklevel=2)


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Call *callback* now if module *name* is imported, else right after
    it is (never if it never is); a callback given twice runs once."""
    callbacks = _AWAITED.setdefault(name, [])
    if callback in callbacks:
        return
    callbacks.append(callback)
    if name in sys.modules:
        callback()
    elif not any(isinstance(f, _AfterImportFinder) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImportFinder(name))
