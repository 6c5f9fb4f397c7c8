"""A recording driver that counts the queries of the dynamic shared memory
opt-in's cold path (the kernel's and the device's attributes), which a
launch whose device's limit is known never makes (tests/test_sharedmem_cpu.py,
tests/test_devices_cpu.py)."""

from numba_cuda_launch.testing import RecordingDriver


class CountingDriver(RecordingDriver):
    """:class:`RecordingDriver` with ``cold_queries``, the number of
    kernel and device attribute queries made."""

    cold_queries = 0

    def _kernel_attribute(self, *args):
        self.cold_queries += 1
        return super()._kernel_attribute(*args)

    def _device_attribute(self, *args):
        self.cold_queries += 1
        return super()._device_attribute(*args)
