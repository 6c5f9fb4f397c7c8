"""Synchronisation and CUDA events from compiled code against the recording
fake driver (no GPU): the driver calls made, in order, their statuses, the
raising and status forms, and that every event created is destroyed."""

import ctypes
import gc
import pickle
import subprocess
import sys
import threading

import numba
import numpy as np
import pytest
from numba import njit
from numba.core import types as nt
from numba.core.errors import TypingError
from numba.core.runtime import rtsys
from support import needs_numba_cuda  # noqa: E402

needs_numba_cuda()

from numba.cuda.cudadrv import driver as cudadrv
from cuda.bindings import driver as binding

import numba_cuda_launch as ncl
from support.childenv import PREAMBLE, child_env
from numba_cuda_launch.testing import RecordingDriver

rng = np.random.default_rng()
INVALID_HANDLE = 400  # CUDA_ERROR_INVALID_HANDLE
NOT_READY = 600  # CUDA_ERROR_NOT_READY


def numba_cuda_stream(handle):
    """A numba-cuda Stream object wrapping the raw *handle* (no GPU needed)."""
    for raw in (binding.CUstream(handle), ctypes.c_void_p(handle)):
        for args in ((raw,), (None, raw, None)):  # Stream(ctx, handle, fin) before 0.27
            try:
                stream = cudadrv.Stream(*args)
                if int(stream) == handle:
                    return stream
            except (TypeError, AttributeError):
                continue
    pytest.fail("cannot make a numba-cuda Stream for this version")


def names(calls):
    return [c[0] for c in calls]


# -- synchronize, stream synchronize and query --------------------------------

@njit
def sync_everything(s):
    ncl.synchronize()
    ncl.stream_synchronize(s)
    ncl.stream_synchronize(ncl.as_voidptr(s + 1))
    ncl.stream_synchronize(None)
    ncl.stream_synchronize()
    return ncl.stream_query(s), ncl.stream_query_status(s)


def test_synchronize_calls_the_driver_with_each_stream_form():
    s = int(rng.integers(1, 1 << 40))
    with RecordingDriver() as fake:
        assert sync_everything(s) == (True, 0)
    assert fake.calls == [("cuCtxSynchronize",), ("cuStreamSynchronize", s),
                          ("cuStreamSynchronize", s + 1), ("cuStreamSynchronize", 0),
                          ("cuStreamSynchronize", 0), ("cuStreamQuery", s), ("cuStreamQuery", s)]


@njit
def stream_methods(stream):
    stream.synchronize()
    a = stream.synchronize_status()
    return stream.query(), stream.query_status(), a


def test_stream_object_methods():
    handle = int(rng.integers(1, 1 << 40))
    stream = numba_cuda_stream(handle)
    with RecordingDriver() as fake:
        assert stream_methods(stream) == (True, 0, 0)
        fake.statuses["cuStreamQuery"] = NOT_READY
        assert stream_methods(stream) == (False, NOT_READY, 0)
    assert fake.calls[:4] == [("cuStreamSynchronize", handle)] * 2 + [("cuStreamQuery", handle)] * 2


def test_busy_stream_query_and_other_errors():
    @njit
    def query(s):
        return ncl.stream_query(s)

    @njit
    def query_status(s):
        return ncl.stream_query_status(s)

    with RecordingDriver() as fake:
        fake.statuses["cuStreamQuery"] = NOT_READY
        assert query(5) is False
        assert query_status(5) == NOT_READY
        fake.statuses["cuStreamQuery"] = 719
        assert query_status(5) == 719
        with pytest.raises(ncl.CudaError) as info:
            query(5)
        del fake.statuses["cuStreamQuery"]
        assert query(5) is True
    assert info.value.name == "CUDA_ERROR_LAUNCH_FAILED" and info.value.code == 719
    assert info.value.operation == "cuStreamQuery"
    assert "cuStreamQuery failed: CUDA_ERROR_LAUNCH_FAILED (719)" == str(info.value)


@njit
def sync_status_forms(s):
    return ncl.synchronize_status(), ncl.stream_synchronize_status(s)


@njit
def sync_raise_context():
    ncl.synchronize()


@njit
def sync_raise_stream(s):
    ncl.stream_synchronize(s)


@pytest.mark.parametrize("code,name", [(719, "CUDA_ERROR_LAUNCH_FAILED"),
                                       (700, "CUDA_ERROR_ILLEGAL_ADDRESS")])
def test_failed_synchronize_raises_or_returns_status(code, name):
    with RecordingDriver() as fake:
        fake.statuses = {"cuCtxSynchronize": code, "cuStreamSynchronize": code + 1}
        assert sync_status_forms(3) == (code, code + 1)
        with pytest.raises(ncl.CudaError) as ctx_err:
            sync_raise_context()
        with pytest.raises(ncl.CudaError) as stream_err:
            sync_raise_stream(3)
    assert ctx_err.value.name == name and ctx_err.value.operation == "cuCtxSynchronize"
    assert name in str(ctx_err.value) and "cuCtxSynchronize" in str(ctx_err.value)
    assert stream_err.value.code == code + 1
    assert stream_err.value.name == ncl.error_name(code + 1)
    assert "cuStreamSynchronize" in str(stream_err.value)


def test_python_forms_call_the_same_code():
    with RecordingDriver() as fake:
        ncl.synchronize()
        ncl.stream_synchronize(9)
        assert ncl.stream_query(9) is True
        fake.statuses["cuStreamQuery"] = NOT_READY
        assert ncl.stream_query(9) is False
        assert ncl.stream_query_status(9) == NOT_READY
        fake.statuses["cuCtxSynchronize"] = 1
        assert ncl.synchronize_status() == 1
        with pytest.raises(ncl.CudaError, match="CUDA_ERROR_INVALID_VALUE"):
            ncl.synchronize()
    assert names(fake.calls) == ["cuCtxSynchronize", "cuStreamSynchronize"] + \
        ["cuStreamQuery"] * 3 + ["cuCtxSynchronize"] * 2


def test_thread_without_context_gets_primary_context():
    @njit
    def go():
        ncl.synchronize()
        e = ncl.event()
        e.record()
        return ncl.stream_query_status(0)

    go.compile(())  # compiled here: the thread below only runs it
    results = []
    with RecordingDriver(has_context=False) as fake:
        t = threading.Thread(target=lambda: results.append(go()))
        t.start()
        t.join()
    assert results == [0]
    # synchronize() binds the primary context first; then it is current for
    # the other calls. (Numba releases the event after its last use.)
    assert names(fake.calls) == ["cuCtxSynchronize", "cuEventCreate", "cuEventRecord",
                                 "cuEventDestroy", "cuStreamQuery"]
    assert fake.contexts_made_current == 1
    assert fake.events_created == fake.events_destroyed == 1


# -- events ---------------------------------------------------------------------

@njit
def time_between(s):
    start = ncl.event()
    end = ncl.event()
    start.record(s)
    end.record(s)
    end.synchronize()
    return start.elapsed_time(end), end.query()


def test_event_timing_calls_and_result():
    s = int(rng.integers(1, 1 << 40))
    with RecordingDriver() as fake:
        fake.elapsed_ms = float(rng.uniform(0.1, 100.0))
        ms, done = time_between(s)
    assert ms == np.float32(fake.elapsed_ms) and done is True
    start, end = fake.calls[0][1], fake.calls[1][1]
    assert start != end
    used = [c for c in fake.calls if c[0] != "cuEventDestroy"]
    assert used == [("cuEventCreate", start, 0), ("cuEventCreate", end, 0),
                    ("cuEventRecord", start, s), ("cuEventRecord", end, s),
                    ("cuEventSynchronize", end), ("cuEventElapsedTime", start, end),
                    ("cuEventQuery", end)]
    # Each destroyed once, after its last use.
    destroyed = [i for i, c in enumerate(fake.calls) if c[0] == "cuEventDestroy"]
    assert sorted(fake.calls[i][1] for i in destroyed) == sorted([start, end])
    assert destroyed[0] > fake.calls.index(("cuEventElapsedTime", start, end))
    assert fake.live_events == []


@pytest.mark.parametrize("timing,blocking,flags", [
    (True, False, 0), (False, False, 2), (True, True, 1), (False, True, 3)])
def test_event_flags(timing, blocking, flags):
    @njit
    def make(timing, blocking):
        e = ncl.event(timing=timing, blocking=blocking)
        return e.query_status()

    @njit
    def make_default():
        e = ncl.event()
        return e.query_status()

    with RecordingDriver() as fake:
        assert make(timing, blocking) == 0
        assert make_default() == 0
    assert [c[2] for c in fake.calls if c[0] == "cuEventCreate"] == [flags, 0]


def test_event_record_takes_every_stream_form():
    @njit
    def record_on(e, s):
        e.record(s)
        e.record(ncl.as_voidptr(s))
        e.record(None)
        e.record()
        return e.record_status(s)

    stream = numba_cuda_stream(0x5150)

    @njit
    def record_on_stream_object(e, stream):
        e.record(stream)

    with RecordingDriver() as fake:
        e = ncl.event()
        assert record_on(e, 77) == 0
        record_on_stream_object(e, stream)
        del e
    assert [c[2] for c in fake.calls if c[0] == "cuEventRecord"] == [77, 77, 0, 0, 77, 0x5150]


@njit
def elapsed_unrecorded():
    a = ncl.event()
    b = ncl.event()
    a.record()
    return a.elapsed_time(b)


@njit
def elapsed_status_forms():
    a = ncl.event()
    b = ncl.event()
    c = ncl.event(timing=False)
    a.record()
    s1 = a.elapsed_time_status(b)[0]  # b never recorded
    b.record()
    c.record()
    s2 = a.elapsed_time_status(c)[0]  # c keeps no timing data
    s3, ms = a.elapsed_time_status(b)
    return s1, s2, s3, ms


def test_elapsed_time_errors_are_named():
    with RecordingDriver() as fake:
        with pytest.raises(ncl.CudaError) as info:
            elapsed_unrecorded()
        s1, s2, s3, ms = elapsed_status_forms()
    assert info.value.name == "CUDA_ERROR_INVALID_HANDLE"
    assert str(info.value) == ("cuEventElapsedTime failed: CUDA_ERROR_INVALID_HANDLE (400): "
                               "the end event was never recorded (call its record(stream) first)")
    assert (s1, s2, s3) == (INVALID_HANDLE, INVALID_HANDLE, 0)
    assert ms == np.float32(fake.elapsed_ms)


@pytest.mark.parametrize("driver_fn,code", [("cuEventRecord", 700), ("cuEventSynchronize", 719),
                                            ("cuEventQuery", 999), ("cuEventDestroy", 4)])
def test_event_methods_raise_with_driver_error_name(driver_fn, code):
    @njit
    def use(which):
        e = ncl.event()
        if which == 0:
            e.record()
        elif which == 1:
            e.synchronize()
        elif which == 2:
            e.query()
        else:
            e.destroy()

    @njit
    def use_status(which):
        e = ncl.event()
        if which == 0:
            return e.record_status()
        elif which == 1:
            return e.synchronize_status()
        elif which == 2:
            return e.query_status()
        return e.destroy_status()

    which = ["cuEventRecord", "cuEventSynchronize", "cuEventQuery",
             "cuEventDestroy"].index(driver_fn)
    with RecordingDriver() as fake:
        fake.statuses[driver_fn] = code
        assert use_status(which) == code
        with pytest.raises(ncl.CudaError) as info:
            use(which)
    assert info.value.code == code and info.value.operation == driver_fn
    assert info.value.name == ncl.error_name(code)
    assert str(info.value).startswith(
        "%s failed: %s (%d)" % (driver_fn, ncl.error_name(code), code))


def test_query_of_busy_event():
    @njit
    def query(e):
        return e.query(), e.query_status()

    with RecordingDriver() as fake:
        e = ncl.event()
        fake.statuses["cuEventQuery"] = NOT_READY
        assert query(e) == (False, NOT_READY)
        del fake.statuses["cuEventQuery"]
        assert query(e) == (True, 0)
        del e


def test_failed_creation():
    @njit
    def make():
        return ncl.event()

    @njit
    def make_status():
        status, e = ncl.event_status()
        return status, e.record_status(), e.query_status(), e.destroy_status()

    with RecordingDriver() as fake:
        fake.statuses["cuEventCreate"] = 2
        with pytest.raises(ncl.CudaError) as info:
            make()
        # The event holds nothing: its methods report an invalid handle
        # without calling the driver, and destroying it is a no-op.
        assert make_status() == (2, INVALID_HANDLE, INVALID_HANDLE, 0)
        with pytest.raises(ncl.CudaError, match="cuEventCreate failed: CUDA_ERROR_OUT_OF_MEMORY"):
            ncl.event()  # from Python
    assert info.value.name == "CUDA_ERROR_OUT_OF_MEMORY" and info.value.operation == "cuEventCreate"
    assert names(fake.calls) == ["cuEventCreate"] * 3
    assert fake.events_created == 0


def test_destroyed_event_is_not_used_again():
    @njit
    def go():
        e = ncl.event()
        e.record()
        e.destroy()
        a = e.record_status()
        b = e.query_status()
        c = e.destroy_status()  # a second destroy does nothing
        return a, b, c

    with RecordingDriver() as fake:
        assert go() == (INVALID_HANDLE, INVALID_HANDLE, 0)
    assert names(fake.calls) == ["cuEventCreate", "cuEventRecord", "cuEventDestroy"]
    assert fake.events_destroyed == 1


def test_typing_errors_name_the_function_and_argument():
    @njit
    def bad_stream(x):
        ncl.stream_synchronize(x)

    @njit
    def bad_record(x):
        e = ncl.event()
        e.record(x)

    @njit
    def bad_flag(x):
        return ncl.event(timing=x)

    @njit
    def bad_end(x):
        e = ncl.event()
        return e.elapsed_time(x)

    for fn, arg, words in [
            (bad_stream, 1.5, ["stream_synchronize()", "stream", "float64"]),
            (bad_record, 2.5, ["CUDAEvent.record()", "stream", "float64"]),
            (bad_flag, 1.5, ["event()", "timing must be a bool", "float64"]),
            (bad_end, 3, ["CUDAEvent.elapsed_time()", "end event", "int64"])]:
        with pytest.raises(TypingError) as info:
            fn(arg)
        for w in words:
            assert w in str(info.value), (w, str(info.value))


# -- release ----------------------------------------------------------------------

N_CYCLES = 100_000


@njit
def cycles(n, s):
    for i in range(n):
        e = ncl.event(timing=(i % 2 == 0))
        e.record(s)
    return n


@njit
def cycles_explicit(n):
    for _ in range(n):
        e = ncl.event()
        e.destroy()
    return n


@njit
def cycles_status(n):
    failed = 0
    for _ in range(n):
        e = ncl.event()
        if e.record_status(0) != 0:
            failed += 1
    return failed


def _meminfos_alive():
    stats = rtsys.get_allocation_stats()
    return stats.mi_alloc - stats.mi_free


@pytest.fixture
def nrt_stats():
    # Numba's allocation counters (NUMBA_NRT_STATS=1 switches them on at
    # start-up; this switches them on for one test).
    from numba.core.runtime import _nrt_python

    _nrt_python.memsys_enable_stats()
    yield
    _nrt_python.memsys_disable_stats()


@pytest.mark.parametrize("form", ["automatic", "explicit", "failing-status"])
def test_no_leak_over_many_create_destroy_cycles(form, nrt_stats):
    n = N_CYCLES
    with RecordingDriver() as fake:
        if form == "automatic":
            cycles(1, 0)
            before = _meminfos_alive()
            assert cycles(n, 5) == n
        elif form == "explicit":
            cycles_explicit(1)
            before = _meminfos_alive()
            assert cycles_explicit(n) == n
        else:
            cycles_status(1)
            fake.statuses["cuEventRecord"] = 700
            before = _meminfos_alive()
            assert cycles_status(n) == n
        after = _meminfos_alive()
        assert fake.live_events == []
    assert fake.events_created == fake.events_destroyed == n + 1
    assert after == before  # and the Numba meminfos holding them were freed


def test_event_returned_to_python_is_released_when_collected():
    @njit
    def make(s):
        e = ncl.event()
        e.record(s)
        return e

    @njit
    def elapsed(a, b):
        return a.elapsed_time(b)

    with RecordingDriver() as fake:
        a, b = make(1), make(1)
        assert isinstance(a, ncl.Event)
        assert a.handle == fake.calls[0][1] and b.handle == fake.calls[2][1]
        assert elapsed(a, b) == np.float32(fake.elapsed_ms)  # unboxed again
        assert a.elapsed_time(b) == np.float32(fake.elapsed_ms)  # the Python method
        assert a.query() is True and b.query_status() == 0
        assert fake.events_destroyed == 0
        handle_a = a.handle
        del a
        gc.collect()
        assert fake.live_events == [b.handle] and fake.calls[-1] == ("cuEventDestroy", handle_a)
        b.destroy()
        assert fake.live_events == [] and b.handle == 0
        with pytest.raises(ncl.CudaError, match="CUDA_ERROR_INVALID_HANDLE"):
            b.record(0)
    with pytest.raises(TypeError):
        ncl.Event()


def test_event_made_from_python():
    with RecordingDriver() as fake:
        e = ncl.event(timing=False)
        e.record(4)
        e.synchronize()
        status, e2 = ncl.event_status()
        e2.record()
        assert status == 0
        with pytest.raises(ncl.CudaError, match="CUDA_ERROR_INVALID_HANDLE"):
            e.elapsed_time(e2)  # e keeps no timing data
        del e, e2
        gc.collect()  # the traceback held them
    assert fake.calls[0] == ("cuEventCreate", fake.calls[0][1], 2)
    assert fake.events_created == fake.events_destroyed == 2


def test_event_outliving_its_recorder_goes_back_to_it():
    # An event is destroyed by the driver that made it: a fake handle never
    # reaches the real driver (or the no-driver stub) after the fake ended.
    with RecordingDriver() as fake:
        e = ncl.event()
    assert fake.events_destroyed == 0
    del e
    gc.collect()
    assert fake.events_destroyed == 1 and fake.calls[-1][0] == "cuEventDestroy"


def test_event_dying_in_a_thread_without_context_is_destroyed_in_its_own():
    @njit
    def make():
        return ncl.event()

    box = []
    with RecordingDriver(has_context=False) as fake:
        t = threading.Thread(target=lambda: box.append(make()))
        t.start()
        t.join()
        handle = box[0].handle
        bound = fake.contexts_made_current

        def drop():  # a fresh thread: no context current
            box.clear()
            gc.collect()
        t = threading.Thread(target=drop)
        t.start()
        t.join()
    # Refused without a context, destroyed once its context was made
    # current, and the thread left as it was (no context): two switches.
    assert fake.calls[-2:] == [("cuEventDestroy", handle)] * 2
    assert fake.events_destroyed == 1 and fake.live_events == []
    assert fake.contexts_made_current == bound + 2


def test_events_in_a_cfunc():
    @numba.cfunc(nt.int32(nt.voidptr))
    def timed(stream):
        start = ncl.event()
        end = ncl.event()
        start.record(stream)
        end.record(stream)
        ncl.stream_synchronize(stream)
        status, ms = start.elapsed_time_status(end)
        if status != 0:
            return status
        return np.int32(ms * 1000) + ncl.synchronize_status()

    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(timed.address)
    with RecordingDriver() as fake:
        fake.elapsed_ms = 2.5
        assert fn(0x77) == 2500
        fake.statuses["cuCtxSynchronize"] = 3
        assert fn(0x77) == 2503
    assert ("cuStreamSynchronize", 0x77) in fake.calls
    assert fake.events_created == fake.events_destroyed == 4


def test_raising_form_in_a_cfunc_is_reported_not_crashing(monkeypatch):
    @numba.cfunc(nt.int32(nt.voidptr))
    def sync(stream):
        ncl.stream_synchronize(stream)
        return 1

    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(sync.address)
    with RecordingDriver() as fake:
        fake.statuses["cuStreamSynchronize"] = 719
        fn(0x77)
    assert len(reported) == 1 and isinstance(reported[0], ncl.CudaError)
    assert str(reported[0]) == "cuStreamSynchronize failed: CUDA_ERROR_LAUNCH_FAILED (719)"


# -- errors ---------------------------------------------------------------------

def test_cuda_launch_error_is_a_cuda_error_with_its_message():
    launch = ncl.CudaLaunchError(701, "k", "a detail")
    assert isinstance(launch, ncl.CudaError) and isinstance(launch, RuntimeError)
    assert str(launch) == ("launch of CUDA kernel 'k' failed: "
                           "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES (701): a detail")
    for err in (launch, ncl.CudaError(NOT_READY, "cuStreamQuery", "x")):
        again = pickle.loads(pickle.dumps(err))
        assert type(again) is type(err) and str(again) == str(err)
        assert (again.code, again.name, again.operation) == (err.code, err.name, err.operation)
    assert ncl.CudaError(NOT_READY, "cuStreamQuery").name == "CUDA_ERROR_NOT_READY"


def test_cached_code_is_refused_under_another_mode():
    from numba_cuda_launch.compat.numba_caching import LaunchTargetChanged
    from numba_cuda_launch.launch.caching import DriverCallCheck

    DriverCallCheck("driver")()  # built for the driver, used with the driver
    with pytest.raises(LaunchTargetChanged):
        DriverCallCheck("simulator")()  # built under the simulator: never reused


CACHE_MODULE = """
from numba import njit
import numba_cuda_launch as ncl

@njit(cache=True)
def run():
    ncl.synchronize()
    e = ncl.event()
    e.record(7)
    return e.query_status()
"""

CACHE_MAIN = """
import os
import cachedevents
from numba_cuda_launch.testing import RecordingDriver
if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
    # compiled code calls no driver there (the recording driver refuses to
    # start): the driver's cached code, reused, would fail CUDA_ERROR_NO_DEVICE
    # without a GPU, and count a cache hit
    status, calls, alive = cachedevents.run(), "-", "-"
else:
    with RecordingDriver() as fake:  # no real driver call, GPU or not
        status = cachedevents.run()
    calls, alive = len(fake.calls), fake.events_created - fake.events_destroyed
hits = sum(cachedevents.run.stats.cache_hits.values())
print(status, calls, alive, hits)
"""


@pytest.mark.slow
def test_cached_code_across_processes_and_modes(tmp_path):
    (tmp_path / "cachedevents.py").write_text(CACHE_MODULE)

    def run(simulated):
        out = subprocess.run([sys.executable, "-c", PREAMBLE + CACHE_MAIN], cwd=tmp_path,
                             env=child_env(NUMBA_ENABLE_CUDASIM="1" if simulated else "0"),
                             capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    # status, driver calls (synchronize, create, record, query, destroy),
    # events left alive, cache hits
    assert run(False) == ["0", "5", "0", "0"]  # compiled
    assert run(False) == ["0", "5", "0", "1"]  # loaded from the cache, same calls
    assert run(True) == ["0", "-", "-", "0"]  # simulated: not the cached code
    assert run(False)[:3] == ["0", "5", "0"]  # the driver's code again


def test_calls_retry_in_a_bound_context_when_the_thread_has_none():
    @njit
    def go(s):
        e = ncl.event()  # refused without a context, made after binding one
        return ncl.stream_query_status(s), e.query_status()

    go.compile((nt.int64,))
    results = []
    with RecordingDriver(has_context=False) as fake:
        t = threading.Thread(target=lambda: results.append(go(3)))
        t.start()
        t.join()
    assert results == [(0, 0)]
    assert names(fake.calls) == ["cuEventCreate", "cuEventCreate", "cuStreamQuery",
                                 "cuEventQuery", "cuEventDestroy"]
    assert fake.calls[0][1] == 0 and fake.calls[1][1] != 0  # none made, then one
    assert fake.contexts_made_current == 1 and fake.events_created == fake.events_destroyed == 1


def test_python_forms_take_foreign_stream_objects():
    class ForeignStream:  # cuda.core's protocol, as CuPy and torch streams have
        def __init__(self, handle):
            self.handle = handle

        def __cuda_stream__(self):
            return (0, self.handle)

    s = int(rng.integers(1, 1 << 40))
    with RecordingDriver() as fake:
        ncl.stream_synchronize(ForeignStream(s))
        assert ncl.stream_query(ForeignStream(s + 1)) is True
        e = ncl.event()
        e.record(ForeignStream(s + 2))
        del e
    assert [c[-1] for c in fake.calls[:2]] == [s, s + 1]
    assert ("cuEventRecord", fake.calls[2][1], s + 2) in fake.calls


# -- a negative integer stream ------------------------------------------------

# Signed, below 0: no CUstream handle (sign-extended, -1 would be 0xff...ff).
NEGATIVE_STREAMS = [-1, np.int64(-1), np.int32(-2), np.int8(-1)]


@njit
def stream_statuses(s):
    e = ncl.event()
    return ncl.stream_synchronize_status(s), ncl.stream_query_status(s), e.record_status(s)


@njit
def constant_stream_statuses():
    e = ncl.event()
    return ncl.stream_synchronize_status(-1), ncl.stream_query_status(-1), e.record_status(-1)


@njit
def raising_form(which, s):
    if which == 0:
        ncl.stream_synchronize(s)
    elif which == 1:
        ncl.stream_query(s)
    else:
        ncl.event().record(s)


@njit
def raising_form_of_constant(which):
    if which == 0:
        ncl.stream_synchronize(-1)
    elif which == 1:
        ncl.stream_query(-1)
    else:
        ncl.event().record(-1)


OPERATIONS = ["cuStreamSynchronize", "cuStreamQuery", "cuEventRecord"]


@pytest.mark.parametrize("s", NEGATIVE_STREAMS + ["constant"])
def test_a_negative_stream_is_refused_before_the_driver(s):
    with RecordingDriver() as fake:
        statuses = constant_stream_statuses() if s == "constant" else stream_statuses(s)
        assert statuses == (1, 1, 1)  # CUDA_ERROR_INVALID_VALUE
        errors = []
        for which in range(3):
            with pytest.raises(ncl.CudaError) as info:
                raising_form_of_constant(which) if s == "constant" else raising_form(which, s)
            errors.append(info.value)
        gc.collect()
    for err, operation in zip(errors, OPERATIONS):
        assert (err.code, err.name, err.operation) == (1, "CUDA_ERROR_INVALID_VALUE", operation)
        assert str(err).startswith("%s failed: CUDA_ERROR_INVALID_VALUE (1): stream is a "
                                   "negative integer" % operation)
    # the driver never saw the stream: no synchronize, query or record at all
    assert not set(OPERATIONS) & set(names(fake.calls))


def test_unsigned_streams_reach_the_driver_as_given():
    with RecordingDriver() as fake:
        assert stream_statuses(np.uint64(2 ** 64 - 1)) == (0, 0, 0)
        assert stream_statuses(np.uint8(255)) == (0, 0, 0)
    assert [c[-1] for c in fake.calls if c[0] in OPERATIONS] == [2 ** 64 - 1] * 3 + [255] * 3
