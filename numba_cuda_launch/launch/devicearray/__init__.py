"""Device arrays as arguments of compiled functions (``docs/devicearrays.md``),
in pipeline order: :mod:`.arraytype` (the ``DeviceArray`` type),
:mod:`.readers` and :mod:`.fastpaths` (reading the objects), :mod:`.typeof`,
:mod:`.unbox`, and :mod:`.producer_wait` (a launch waiting for producer streams).
"""

from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray, as_array_type, \
    device_array_parts, make_device_array
from numba_cuda_launch.launch.devicearray.readers import on_stream
from numba_cuda_launch.launch.devicearray import typeof  # noqa: F401  (registrations)

__all__ = ["DeviceArray", "as_array_type", "device_array_parts", "make_device_array",
           "on_stream"]
