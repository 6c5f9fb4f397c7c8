"""Layer 2, launch: ``kernel[...]`` in CPU nopython code. One module per
concept (its type, data model, typing and lowering together); importing this
package registers them all. README.md lists the modules; docs/architecture.md
follows one launch through them.
"""

from numba_cuda_launch.compat.numba_dispatcher import lead_typing_errors_with
from numba_cuda_launch.compat.versions import has_numba_cuda
from numba_cuda_launch.launch.refusals import leading_line

# The kernel sources, before kernel[...] is typed for their kernels:
# numba-cuda's only where it is installed (its module imports numba.cuda);
# numba-cuda-mlir's and the foreign kernels' import nothing of their
# compilers until a kernel of theirs is seen.
if has_numba_cuda():
    from numba_cuda_launch.kernels import numba_cuda  # noqa: F401
from numba_cuda_launch.kernels import foreign, numba_cuda_mlir  # noqa: E402,F401

from numba_cuda_launch.launch import (  # noqa: E402,F401  (registrations)
    halffloat,
    stream,
    devicearray,
    launchconfig,
    call,
    sync,
    events,
    occupancy,
)

# A launch's typing error says what is wrong in its first line, before
# Numba's pipeline headers.
lead_typing_errors_with(leading_line)
