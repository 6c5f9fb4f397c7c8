"""Public name of :mod:`numba_cuda_launch.runtime.recording` (this module *is* that
module: importing it binds the implementation's module object here)."""

import sys

from numba_cuda_launch.runtime import recording as _impl

sys.modules[__name__] = _impl
