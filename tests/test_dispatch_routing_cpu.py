"""numba-cuda's device arrays through Numba's C dispatch, on the CPU.

Numba types a numba-cuda array in C by its ``_numba_type_`` (the host
``Array`` type), so without routing every call took Numba's slow path, and
a function compiled for host arrays handed device arrays to the host
unboxer. numba-cuda arrays are made here over host memory (a ``gpu_data``
that only carries a pointer); launches go to the recording driver.
"""

import ctypes
import struct

import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit
from numba.cuda.cudadrv.devicearray import DeviceNDArray

from numba_cuda_launch.compat.numba_dispatcher import routes_of
from numba_cuda_launch.launch.devicearray import DeviceArray


class _Memory:
    def __init__(self, host):
        self.host = host
        self.device_ctypes_pointer = ctypes.c_void_p(host.ctypes.data)


def device_array(host, stream=0):
    """A numba-cuda DeviceNDArray whose 'device' memory is *host*'s."""
    return DeviceNDArray(host.shape, host.strides, host.dtype, stream=stream,
                         gpu_data=_Memory(host))


class SlowPathCounter:
    """Counts the calls that reach the dispatcher's Python slow path."""

    def __init__(self, disp):
        self.disp, self.count = disp, 0
        self.original = disp._compile_for_args

    def __enter__(self):
        def counting(*args, **kws):
            self.count += 1
            return self.original(*args, **kws)
        self.disp._compile_for_args = counting
        return self

    def __exit__(self, *exc):
        del self.disp._compile_for_args


@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]


def new_launcher():
    """A fresh dispatcher launching ``scale`` (routes are per dispatcher)."""
    @njit
    def launch(x, out):
        scale[1, 32](x, out)
    return launch


def params(launch):
    return [struct.unpack("<q", p)[0] for p in launch.params]


def array_params(a, ptr=None):
    """numba-cuda's parameters for array *a*: meminfo, parent, nitems,
    itemsize, data, shape..., strides..."""
    return [0, 0, a.size, a.itemsize, a.ctypes.data if ptr is None else ptr,
            *a.shape, *a.strides]


def test_device_arrays_are_called_without_the_slow_path(fake_driver):
    launch = new_launcher()
    x, out = np.arange(8, dtype=np.float32), np.zeros(8, np.float32)
    dx, dout = device_array(x), device_array(out)
    launch(dx, dout)
    with SlowPathCounter(launch) as slow:
        for _ in range(5):
            launch(dx, dout)
    assert slow.count == 0
    assert len(fake_driver.launches) == 6
    assert params(fake_driver.launches[-1]) == array_params(x) + array_params(out)
    assert launch.signatures == [(DeviceArray(dx._numba_type_.dtype, 1, "C"),) * 2]


def test_function_compiled_for_host_arrays_then_given_device_arrays(fake_driver):
    # A launcher seen first with host arrays (it launches only for large ones).
    @njit
    def maybe_launch(x, out):
        if x.size > 100:
            scale[1, 32](x, out)
        return x.size

    x, out = np.ones(8, np.float32), np.zeros(8, np.float32)
    assert maybe_launch(x, out) == 8
    big, big_out = np.ones(128, np.float32), np.zeros(128, np.float32)
    assert maybe_launch(device_array(big), device_array(big_out)) == 128
    with SlowPathCounter(maybe_launch) as slow:
        assert maybe_launch(x, out) == 8
        assert maybe_launch(device_array(big), device_array(big_out)) == 128
    assert slow.count == 0
    assert [params(launch)[4] for launch in fake_driver.launches] == [big.ctypes.data] * 2
    assert len(maybe_launch.signatures) == 2


def test_function_compiled_for_device_arrays_then_given_host_arrays():
    @njit
    def size(x):
        return x.size * 10 + x.ndim

    x = np.ones((2, 3), np.float32)
    assert size(device_array(x)) == 62
    assert size(x) == 62
    with SlowPathCounter(size) as slow:
        assert size(x) == 62
        assert size(device_array(x)) == 62
    assert slow.count == 0
    types = {str(t[0]).split("(")[0] for t in size.signatures}
    assert types == {"DeviceArray", "array"}


def test_layouts_get_their_own_routes(fake_driver):
    launch = new_launcher()
    x, out = np.arange(16, dtype=np.float32), np.zeros(16, np.float32)
    launch(device_array(x), device_array(out))
    launch(device_array(x[::2]), device_array(out[::2]))
    assert params(fake_driver.launches[1]) == array_params(x[::2]) + array_params(out[::2])
    assert {str(sig[0]) for sig in launch.signatures} == \
        {"DeviceArray(float32, 1d, C)", "DeviceArray(float32, 1d, A)"}
    assert len(routes_of(launch)) == 2


@pytest.mark.parametrize("order", ["dd hh dh hd", "dh hd hh dd", "hd dh dd hh"])
def test_mixed_device_and_host_arguments_route_by_class(order):
    @njit
    def total(a, b):
        return a.size + b.size

    h = np.ones(4, np.float32)
    d = device_array(h)
    pick = {"d": d, "h": h}
    # A device array comes first (see the last test): then any order works.
    calls = [(pick[a], pick[b]) for a, b in order.split()]
    for a, b in calls * 2:
        assert total(a, b) == 8
    assert len(total.signatures) == 4
    with SlowPathCounter(total) as slow:
        for a, b in calls:
            assert total(a, b) == 8
    assert slow.count == 0


def test_only_changed_routers_are_compiled_again(monkeypatch):
    from numba.core import types as nt

    from numba_cuda_launch.compat import numba_dispatcher

    built = []
    original = numba_dispatcher._build_router
    monkeypatch.setattr(numba_dispatcher, "_build_router",
                        lambda disp, route: (built.append(route.codes), original(disp, route)))

    @njit
    def maybe_launch(x, out):
        if x.size > 10**9:
            scale[1, 32](x, out)
        return x.size

    kinds = [nt.float32, nt.float64, nt.int32, nt.int64, nt.int16, nt.uint8]
    for dt in kinds:  # host arrays of a CUDA-using function: one guard router each
        maybe_launch.compile((nt.Array(dt, 1, "C"), nt.Array(dt, 1, "C")))
    assert len(built) == len(set(built)) == len(kinds)
    assert maybe_launch(np.ones(3), np.ones(3)) == 3


def test_producer_stream_of_a_numba_cuda_array_is_synchronised(fake_driver):
    launch = new_launcher()
    x = np.ones(4, np.float32)
    launch(device_array(x, stream=0x55), device_array(x, stream=0x55))
    synced = [c[1] for c in fake_driver.calls if c[0] == "cuStreamSynchronize"]
    assert synced == [0x55]


def test_recompile_drops_the_routes_and_still_works():
    @njit
    def size(x):
        return x.size

    d = device_array(np.ones(5, np.float32))
    assert size(d) == 5
    assert routes_of(size)
    size.recompile()
    assert size(d) == 5
    assert size(np.ones(3)) == 3


def test_functions_without_cuda_keep_numbas_dispatch_for_host_arrays():
    # Nothing is installed for a function compiled only for host arrays
    # that uses no CUDA: it keeps Numba's direct C dispatch (and, like with
    # numba-cuda alone, cannot then take a numba-cuda array of that type).
    @njit
    def size(x):
        return x.size

    assert size(np.ones(3, np.float32)) == 3
    assert routes_of(size) == {}
    with pytest.raises(TypeError):
        size(device_array(np.ones(3, np.float32)))


def test_fields_of_a_numba_cuda_array_are_read_once_and_follow_its_stream(fake_driver):
    from numba_cuda_launch.launch.devicearray.unbox import READERS

    launch = new_launcher()
    x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    dx, dout = device_array(x), device_array(out)
    reads = []
    reader = READERS[DeviceNDArray]

    def counting(obj, ndim):
        reads.append(obj)
        return reader(obj, ndim)

    READERS[DeviceNDArray] = counting
    try:
        for _ in range(3):
            launch(dx, dout)
        assert len(reads) == 2  # once per array: compiled code reads the rest
        dx.stream = 0x66  # a producer stream now: read again, and waited for
        launch(dx, dout)
    finally:
        READERS[DeviceNDArray] = reader
    assert reads[2:] == [dx]
    assert [c[1] for c in fake_driver.calls if c[0] == "cuStreamSynchronize"] == [0x66]
    assert all(params(launch_) == array_params(x) + array_params(out)
               for launch_ in fake_driver.launches)


CACHE_MODULE = """
import ctypes
import numpy as np
from numba import cuda, njit
from numba.cuda.cudadrv.devicearray import DeviceNDArray
import numba_cuda_launch

class Memory:
    def __init__(self, host):
        self.device_ctypes_pointer = ctypes.c_void_p(host.ctypes.data)

class CAI:
    def __init__(self, a, stream):
        self.__cuda_array_interface__ = dict(shape=a.shape, strides=None, typestr=a.dtype.str,
                                             data=(a.ctypes.data, False), version=3,
                                             stream=stream)

@cuda.jit
def scale(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]

@njit(cache=True)
def run(x, out):
    scale[1, 32](x, out)
    return out.size

@njit(cache=True)
def maybe_launch(x, out):
    if x.size > 10**9:
        scale[1, 32](x, out)
    return x.size

@njit
def caller(x, out):  # not cached: links maybe_launch, from the cache the second time
    return maybe_launch(x, out) + 1
"""

CACHE_MAIN = """
import numpy as np, struct
import cachedev
from numba_cuda_launch.testing import RecordingDriver
from cachedev import CAI, DeviceNDArray, Memory
x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
d = DeviceNDArray(out.shape, out.strides, out.dtype, gpu_data=Memory(out))
with RecordingDriver() as fake:
    for _ in range(2):
        assert cachedev.run(CAI(x, 0x42), d) == 4
params = [struct.unpack("<q", p)[0] for p in fake.launches[-1].params]
synced = [c[1] for c in fake.calls if c[0] == "cuStreamSynchronize"]
assert cachedev.caller(x, out) == 5  # host arrays first, then numba-cuda arrays
assert cachedev.caller(d, d) == 5
print(params[4] == x.ctypes.data, params[11] == out.ctypes.data, synced,
      sum(cachedev.run.stats.cache_hits.values()))
"""


@pytest.mark.slow
def test_cached_function_taking_device_arrays_works_from_the_cache(tmp_path):
    import subprocess
    import sys

    from support.childenv import PREAMBLE, child_env

    (tmp_path / "cachedev.py").write_text(CACHE_MODULE)

    def run():
        out = subprocess.run([sys.executable, "-c", PREAMBLE + CACHE_MAIN], cwd=tmp_path,
                             env=child_env(NUMBA_CUDA_LAUNCH_CC="9.0", NUMBA_ENABLE_CUDASIM="0"),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert run() == ["True", "True", "[66,", "66]", "0"]  # compiled, synced once per call
    assert run() == ["True", "True", "[66,", "66]", "1"]  # loaded from the cache


def test_explicit_signatures_refuse_device_arrays_with_numbas_message():
    @njit("int64(float32[::1])")
    def maybe_launch(x):
        if x.size > 10**9:
            scale[1, 32](x, x)
        return x.size

    assert maybe_launch(np.ones(3, np.float32)) == 3
    with pytest.raises(TypeError, match="No matching definition"):
        maybe_launch(device_array(np.ones(3, np.float32)))


def test_each_producer_stream_is_waited_for_once_per_call_of_a_launcher(fake_driver):
    class CAI:
        def __init__(self, a, stream):
            self.__cuda_array_interface__ = dict(
                shape=a.shape, strides=None, typestr=a.dtype.str, data=(a.ctypes.data, False),
                version=3, stream=stream)

    @njit
    def total(a, b, c, d):
        scale[1, 32, 0x42](a, b)
        scale[1, 32, 0x42](c, d)
        return a.size + b.size + c.size + d.size

    h = np.ones(2, np.float32)
    assert total(CAI(h, 0xA), CAI(h, 0xB), CAI(h, 0xA), CAI(h, 0xB)) == 8
    assert [c[1] for c in fake_driver.calls if c[0] == "cuStreamSynchronize"] == [0xA, 0xB]
    assert len(fake_driver.launches) == 2
