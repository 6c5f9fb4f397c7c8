"""Callbacks run right after a module is imported, whoever imports it and
whenever: the package extends modules it does not import itself
(``numba.cuda`` and numba-cuda-mlir, which the user imports; Numba's
``numba.core.boxing``, imported at a first compilation) at the moment they
exist, before anything uses them. One ``sys.meta_path`` finder per awaited
module finds it as the other finders do and gives it a loader that runs the
module, then the callbacks; the finder leaves once the module has run (a
probe such as ``importlib.util.find_spec``, or an import that failed, leaves
it waiting). docs/architecture.md, "Imports on demand".
"""

import importlib.abc
import importlib.util
import sys
import threading
import warnings
from typing import Callable, Dict, List

__all__ = ["when_imported"]

#: module name -> the callbacks run once it is imported
_AWAITED: Dict[str, List[Callable[[], None]]] = {}
_LOCAL = threading.local()  # the names being found by the other finders, per thread


class _CallingBackLoader(importlib.abc.Loader):
    """The loader the other finders gave, which then calls back: everything
    but ``exec_module`` is the original's (resources, source, reload)."""

    def __init__(self, loader, name):
        self._loader, self._name = loader, name

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _imported(self._name)

    def __getattr__(self, attribute):
        return getattr(self._loader, attribute)


class _AfterImportFinder(importlib.abc.MetaPathFinder):
    """Finds module *name* as the other finders do, with a
    :class:`_CallingBackLoader`."""

    def __init__(self, name):
        self.name = name

    def find_spec(self, name, path=None, target=None):
        finding = getattr(_LOCAL, "finding", None)
        if name != self.name or finding is not None and name in finding:
            return None
        _LOCAL.finding = (finding or set()) | {name}
        try:
            spec = importlib.util.find_spec(name)
        finally:
            _LOCAL.finding = finding
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _CallingBackLoader(spec.loader, name)
        return spec


def _imported(name):
    """Module *name* has run: the finder leaves, the callbacks run (a
    failure is a warning: the user's import goes on, and what needed the
    callback says so where it is used)."""
    for finder in [f for f in sys.meta_path
                   if isinstance(f, _AfterImportFinder) and f.name == name]:
        try:
            sys.meta_path.remove(finder)
        except ValueError:  # another thread's import removed it
            pass
    for callback in list(_AWAITED.get(name, ())):
        try:
            callback()
        except Exception as exc:
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
