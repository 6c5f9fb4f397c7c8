"""Layer 2, launch: ``kernel[...]`` in CPU nopython code. One module per
concept (its type, data model, typing and lowering together); importing this
package registers what every launch needs; events, synchronisation, CUDA
graphs and kernel handles register when first used (the package's
``__getattr__``). README.md lists the modules; docs/architecture.md follows
one launch through them.
"""

from numba_cuda_launch.compat.numba_dispatcher import lead_typing_errors_with
# the installed compilers' kernel sources, before kernel[...] is typed for their kernels
from numba_cuda_launch.kernels import installed  # noqa: F401
from numba_cuda_launch.launch.refusals import leading_line

from numba_cuda_launch.launch import (  # noqa: E402,F401  (registrations)
    halffloat,
    stream,
    devicearray,
    launchconfig,
    call,
    occupancy,
)

# A launch's typing error says what is wrong in its first line, before
# Numba's pipeline headers.
lead_typing_errors_with(leading_line)
