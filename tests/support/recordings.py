"""A fixture for GPU tests that record graphs: the streams a test makes with
``cuda.stream()`` are checked when it ends, and a recording left open (a
test that failed mid-recording, or one that forgot ``end_capture``) is ended
and its graph destroyed, failing that test, so that the worker's later
tests do not meet a process with a capture still running (where the driver
refuses ``cuMemAlloc`` with ``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``)."""

import pytest
from numba import cuda


def _end_recording(stream):
    """End *stream*'s recording, if it has one; True if it had."""
    from cuda.bindings import driver as d

    err, status = d.cuStreamIsCapturing(stream.handle)
    if err != d.CUresult.CUDA_SUCCESS or \
            status == d.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE:
        return False
    err, graph = d.cuStreamEndCapture(stream.handle)
    if err == d.CUresult.CUDA_SUCCESS and int(graph):
        d.cuGraphDestroy(graph)
    return True


@pytest.fixture(autouse=True)
def no_recording_left(monkeypatch):
    """Autouse in a module by importing it: ends what a test left recording."""
    made = []
    make = cuda.stream

    def stream(*args, **kwargs):
        s = make(*args, **kwargs)
        made.append(s)
        return s

    monkeypatch.setattr(cuda, "stream", stream)
    yield
    # bodies (made after their graph's stream) first
    left = [i for i, s in reversed(list(enumerate(made))) if _end_recording(s)]
    assert not left, "streams %s of this test were still recording when it ended" % left
