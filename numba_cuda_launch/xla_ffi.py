"""Public name of :mod:`numba_cuda_launch.interop.xla_ffi` (this module *is* that
module: importing it binds the implementation's module object here)."""

import sys

from numba_cuda_launch.interop import xla_ffi as _impl

sys.modules[__name__] = _impl
