"""Public name of :mod:`numba_cuda_launch.launch.graph` (this module *is* that
module: importing it binds the implementation's module object here)."""

import sys

from numba_cuda_launch.launch import graph as _impl

sys.modules[__name__] = _impl
