"""Public name of :mod:`numba_cuda_launch.interop.aot` (this module *is* that
module: importing it binds the implementation's module object here);
``python -m numba_cuda_launch.aot`` runs its command line."""

import sys

from numba_cuda_launch.interop import aot as _impl

if __name__ == "__main__":
    sys.exit(_impl.main())
sys.modules[__name__] = _impl
