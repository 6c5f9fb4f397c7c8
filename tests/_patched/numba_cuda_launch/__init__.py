"""Test-only alias, used when NCL_TEST_PATCHED=1: the suite then tests the
feature built into a patched numba-cuda (numba.cuda.cpu_launch, see
patches/) instead of this package, which must not be installed."""

import importlib
import pkgutil
import sys

import numba.cuda.cpu_launch as _target

for _info in pkgutil.iter_modules(_target.__path__):
    if _info.name == "jax":  # imports JAX: alias it only on demand
        continue
    sys.modules[__name__ + "." + _info.name] = importlib.import_module(
        _target.__name__ + "." + _info.name)


def __getattr__(name):
    if name == "jax":
        module = importlib.import_module(_target.__name__ + ".jax")
        sys.modules[__name__ + ".jax"] = module
        return module
    return getattr(_target, name)


class _JaxFinder:
    """Resolve `import numba_cuda_launch.jax` to the patched module."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if fullname == __name__ + ".jax":
            return importlib.util.find_spec(_target.__name__ + ".jax")
        return None


sys.meta_path.insert(0, _JaxFinder)
globals().update({k: getattr(_target, k) for k in _target.__all__})
