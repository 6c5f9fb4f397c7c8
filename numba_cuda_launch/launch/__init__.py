"""Layer 2, launch: ``kernel[...]`` in CPU nopython code. One module per
concept (its type, data model, typing and lowering together); importing this
package registers them all. README.md lists the modules; docs/architecture.md
follows one launch through them.
"""

from numba_cuda_launch.compat import numba_cuda as _nc
from numba_cuda_launch.compat.numba_dispatcher import lead_typing_errors_with
from numba_cuda_launch.errors import leading_line
from numba_cuda_launch.launch import (  # noqa: F401  (registrations)
    halffloat,
    stream,
    devicearray,
    launchconfig,
    call,
    sync,
    events,
    occupancy,
)
from numba_cuda_launch.launch import mlirkernel  # noqa: F401  (registrations)
from numba_cuda_launch.launch import foreignkernel  # noqa: F401  (registrations)
from numba_cuda_launch.launch.backends import driver as _driver_backend  # noqa: F401

# A launch's typing error says what is wrong in its first line, before
# Numba's pipeline headers.
lead_typing_errors_with(leading_line)

if _nc.simulator_enabled():
    from numba_cuda_launch.launch.backends import simulator as _simulator_backend  # noqa: F401
