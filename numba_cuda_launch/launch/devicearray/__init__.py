"""Device arrays as arguments of compiled functions: one concept, in the
order of its pipeline (see ``docs/devicearrays.md``).

* :mod:`.arraytype` -- the ``DeviceArray`` type: model, attributes, views;
* :mod:`.readers` -- reading numba-cuda arrays, the CUDA Array Interface
  and DLPack; ``on_stream``;
* :mod:`.fastpaths` -- cheaper readers for numba-cuda, CuPy and PyTorch;
* :mod:`.unbox` -- reading an object at each call, checked against its type;
* :mod:`.typeof` -- typing the objects (Numba's ``typeof`` and the
  dispatcher's fast typing);
* :mod:`.producer_wait` -- a launch waiting for its arrays' producer streams.
"""

from numba_cuda_launch.launch.devicearray.arraytype import DeviceArray, as_array_type, \
    device_array_parts, make_device_array
from numba_cuda_launch.launch.devicearray.readers import on_stream
from numba_cuda_launch.launch.devicearray import typeof  # noqa: F401  (registrations)

__all__ = ["DeviceArray", "as_array_type", "device_array_parts", "make_device_array",
           "on_stream"]
