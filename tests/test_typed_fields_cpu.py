"""Fields read while typing (CuPy and PyTorch arrays): one read per argument
and call, used only by the call that typed it. A PyTorch-like fake over
host memory (its class looks like ``torch.Tensor`` to the package) with the
recording driver."""

import struct
import sys
import threading

import numba
import numpy as np
import pytest
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba import cuda, njit

from numba_cuda_launch.launch.devicearray import DeviceArray
from numba_cuda_launch.launch.devicearray.unbox import READERS, TYPED_FIELDS

rng = np.random.default_rng()


class _TensorBase:
    """What the package's PyTorch reader reads, over a NumPy array."""

    def __init__(self, a):
        self.a = a

    shape = property(lambda self: self.a.shape)
    dtype = property(lambda self: self.a.dtype)
    is_cuda, requires_grad, layout = True, False, "strided"

    def stride(self):
        return tuple(s // self.a.itemsize for s in self.a.strides)

    def element_size(self):
        return self.a.itemsize

    def numel(self):
        return self.a.size

    def data_ptr(self):
        return self.a.ctypes.data

    @property
    def __cuda_array_interface__(self):
        return dict(shape=self.a.shape, strides=self.a.strides, typestr=self.a.dtype.str,
                    data=(self.a.ctypes.data, False), version=2)


Tensor = type("Tensor", (_TensorBase,), {"__module__": "torch"})


@pytest.fixture
def fake_driver():
    from numba_cuda_launch.testing import RecordingDriver

    with RecordingDriver() as fake:
        yield fake


@pytest.fixture
def counted_reads():
    """The unboxing reads of Tensor objects that did not come from typing."""
    numba.typeof(Tensor(np.zeros(2, np.float32)))  # the class learns its fast path
    reader = READERS[Tensor]
    reads = []

    def counting(obj, ndim):
        reads.append(obj)
        return reader(obj, ndim)

    READERS[Tensor] = counting
    yield reads
    READERS[Tensor] = reader


@cuda.jit
def axpy(a, x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + out[i]


@njit
def launch(x, out):
    axpy[1, 32](np.float32(2), x, out)


def data_params(launch):
    """The data pointers of the two array parameters (after the scalar)."""
    params = [struct.unpack("<q", p)[0] for p in launch.params[1:]]
    return params[4], params[4 + 7]


def test_typing_reads_the_fields_of_the_call(fake_driver, counted_reads):
    x, out = rng.standard_normal(8).astype(np.float32), np.zeros(8, np.float32)
    tx, tout = Tensor(x), Tensor(out)
    for _ in range(3):
        launch(tx, tout)
    assert counted_reads == []  # no second read at unboxing
    assert [data_params(x) for x in fake_driver.launches] == [(x.ctypes.data, out.ctypes.data)] * 3
    # The same object with other memory: typed, so read, again at each call.
    y = rng.standard_normal(8).astype(np.float32)
    tx.a = y
    launch(tx, tout)
    assert data_params(fake_driver.launches[-1]) == (y.ctypes.data, out.ctypes.data)
    assert counted_reads == []


def test_one_object_twice_in_a_call(fake_driver, counted_reads):
    x = np.zeros(8, np.float32)
    t = Tensor(x)
    launch(t, t)
    assert data_params(fake_driver.launches[0]) == (x.ctypes.data, x.ctypes.data)


def test_objmode_unboxing_reads_afresh(fake_driver, counted_reads):
    x, other = np.zeros(4, np.float32), np.zeros(4, np.float32)
    t = Tensor(x)
    launch.typeof_pyval(t)  # a typing of t, then a change its entry does not know
    assert TYPED_FIELDS.entries[id(t)][2][0] == x.ctypes.data
    t.a = other
    ty = DeviceArray(numba.float32, 1, "C")

    @njit
    def f():
        with numba.objmode(v=ty):
            v = t
        launch(v, v)

    f()
    assert counted_reads == [t]
    assert data_params(fake_driver.launches[0]) == (other.ctypes.data, other.ctypes.data)


class ThreadTensor(Tensor):
    """One object whose memory differs per thread (as CuPy's current
    stream, part of its fields, does)."""

    def __init__(self, arrays):
        self.arrays = arrays

    @property
    def a(self):
        return self.arrays[threading.get_ident()]


def test_fields_typed_on_another_thread_are_not_used(fake_driver):
    launch(Tensor(np.zeros(4, np.float32)), Tensor(np.zeros(4, np.float32)))
    arrays_of, ready = {}, threading.Barrier(4)
    errors = []
    t = ThreadTensor(arrays_of)

    def work():
        arrays_of[threading.get_ident()] = np.zeros(16, np.float32)
        ready.wait()
        try:
            for _ in range(300):
                launch(t, t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave between typing and unboxing
    try:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    finally:
        sys.setswitchinterval(switch)
    assert errors == []
    mixed = [la for la in fake_driver.launches[1:] if len(set(data_params(la))) != 1]
    assert mixed == []
    assert len(fake_driver.launches) == 1 + 4 * 300


def test_an_entry_of_another_object_or_thread_is_not_used(fake_driver, counted_reads):
    x = np.zeros(4, np.float32)
    t = Tensor(x)

    @njit
    def g(v):
        launch(v, v)

    g(t)
    ref, ident, fields = TYPED_FIELDS.entries[id(t)]
    assert fields[0] == x.ctypes.data
    stale = (fields[0] + 64,) + fields[1:]
    for entry in [(ref, ident + 1, stale), (lambda: None, ident, stale)]:
        TYPED_FIELDS.entries[id(t)] = entry
        # The call's wrapper without a typing of t just before (its entry
        # point called directly) finds an entry it must not trust.
        g.overloads[g.signatures[0]].entry_point(t)
        assert data_params(fake_driver.launches[-1]) == (x.ctypes.data, x.ctypes.data)
    assert counted_reads == [t, t]


@njit
def launch_pair(pair):
    launch(pair[0], pair[1])
    return pair[0].size


@njit
def launch_first_of(items):
    launch(items[0], items[0])
    return items[0].size


@njit
def size_of(x):
    return x.size


def test_items_of_tuple_and_list_arguments_are_read_afresh(fake_driver, counted_reads):
    # Only the call's own arguments were typed just before: an item of a
    # tuple or list is read when unboxed, never from an earlier typing.
    x, y, big = np.zeros(8, np.float32), np.ones(8, np.float32), np.zeros(64, np.float32)
    t = Tensor(x)
    launch(t, t)  # typed (fields kept for t), then t changes memory
    t.a = y
    launch_pair((t, t))
    assert data_params(fake_driver.launches[-1]) == (y.ctypes.data, y.ctypes.data)
    launch_first_of([t])
    assert data_params(fake_driver.launches[-1]) == (y.ctypes.data, y.ctypes.data)
    size_of(t)
    t.a = big  # another size, same type
    assert launch_pair((t, t)) == 64
    t.a = np.zeros((2, 4), np.float32)
    size_of(t)  # fields of 2 dimensions kept for t
    t.a = y
    assert launch_pair((t, t)) == 8
    assert data_params(fake_driver.launches[-1]) == (y.ctypes.data, y.ctypes.data)


def test_threads_each_launch_their_own_arrays(fake_driver, counted_reads):
    arrays_of = [np.zeros(16, np.float32) for _ in range(4)]
    errors = []

    def work(a):
        try:
            t = Tensor(a)
            for _ in range(200):
                launch(t, t)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    launch(Tensor(arrays_of[0]), Tensor(arrays_of[0]))
    threads = [threading.Thread(target=work, args=(a,)) for a in arrays_of]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    seen = {}
    for la in fake_driver.launches[1:]:
        ptr, out = data_params(la)
        assert ptr == out
        seen[ptr] = seen.get(ptr, 0) + 1
    assert seen == {a.ctypes.data: 200 for a in arrays_of}
