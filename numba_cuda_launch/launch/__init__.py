"""Layer 2, launch: ``kernel[...]`` in CPU nopython code.

One concept per module, each with its type, data model, typing and
lowering together:

* :mod:`.launchconfig` -- ``kernel[griddim, blockdim, stream, sharedmem]``:
  the ``LaunchConfig`` type, its model, the ``getitem`` typing and lowering;
* :mod:`.selection` -- which kernel overload a launch calls (the conversion
  rules, the typing errors), chosen once; the kernel compilers' adapters
  (in compat) it asks;
* :mod:`.call` -- ``cfg(args...)``, ``cfg.launch_status(...)``,
  ``cfg.preload(...)``: typing and lowering, through a backend;
* :mod:`.params` -- packing kernel parameters; their layout;
* :mod:`.occupancy` -- ``cfg.max_active_blocks(...)`` and the other
  occupancy queries;
* :mod:`.graph` -- CUDA graphs: stream capture, replay and update of
  recorded launches (public as :mod:`numba_cuda_launch.graphs`);
* :mod:`.backends` -- how a launch is carried out: the CUDA driver
  (:mod:`.backends.driver`, one backend per kernel compiler) or numba-cuda's
  simulator (:mod:`.backends.simulator`);
* :mod:`.mlirkernel` -- numba-cuda-mlir kernels as CPU values;
* :mod:`.caching` -- ``cache=True`` code keyed on its launch target;
* :mod:`.stream` -- stream objects as nopython values;
* :mod:`.devicearray` -- device arrays (numba-cuda, the CUDA Array
  Interface, DLPack) as nopython values: their type, typing, reading at
  each call, and a launch waiting for their producer streams;
* :mod:`.pyobjects` -- Python objects compiled unboxing code calls, looked
  up once per process;
* :mod:`.sync` -- ``synchronize()``, stream synchronize and query;
* :mod:`.events` -- CUDA events (``event()``, record, elapsed time);
* :mod:`.halffloat` -- float16 bit conversions in CPU code;
* :mod:`.pointer` -- ``as_voidptr``;
* :mod:`.handle` -- ``kernel_handle()`` for C callers.
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
