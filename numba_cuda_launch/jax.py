"""Public name of :mod:`numba_cuda_launch.interop.jax` (this module *is* that
module: importing it binds the implementation's module object here)."""

import sys

from numba_cuda_launch.interop import jax as _impl

sys.modules[__name__] = _impl
