"""Test-only alias, used when NCL_TEST_PATCHED=1 (or =mlir): the suite then
tests the feature built into a patched numba-cuda (numba.cuda.cpu_launch,
see patches/) or numba-cuda-mlir (numba_cuda_mlir.cpu_launch,
patches/numba-cuda-mlir/) instead of this package, which must not be
installed.

Every ``numba_cuda_launch.<name>`` import (subpackages included) resolves to
the module object of ``numba.cuda.cpu_launch.<name>``, imported on demand
(so ``jax`` is imported only by the tests that use it)."""

import importlib
import importlib.abc
import importlib.util
import os
import sys

_target = importlib.import_module("numba_cuda_mlir.cpu_launch"
                                  if os.environ.get("NCL_TEST_PATCHED") == "mlir"
                                  else "numba.cuda.cpu_launch")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.util.spec_from_loader(fullname, _Alias)
        return None

    @staticmethod
    def create_module(spec):
        return importlib.import_module(_target.__name__ + spec.name[len(__name__):])

    @staticmethod
    def exec_module(module):
        pass  # already executed under its real name


sys.meta_path.insert(0, _Alias())


def __getattr__(name):
    # the package's names first (those it loads on demand too), then its
    # submodules; an AttributeError names the real module
    try:
        return getattr(_target, name)
    except AttributeError:
        if importlib.util.find_spec(_target.__name__ + "." + name) is None:
            raise
    return importlib.import_module(__name__ + "." + name)


def __dir__():
    return sorted(set(globals()) | set(dir(_target)))


# what the package has loaded; the rest as the package loads it (on demand)
globals().update({k: v for k, v in vars(_target).items() if k in _target.__all__})
