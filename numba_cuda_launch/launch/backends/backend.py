"""The interface of a launch backend (:class:`LaunchBackend`): what the rest
of the package asks of :data:`~numba_cuda_launch.launch.backends.BACKEND`.
docs/architecture.md, step 5.
"""

import contextlib
from typing import Any, Dict, Optional

__all__ = ["LaunchBackend", "BOUND_TARGET"]

#: The launch target recorded in simulated code whose launches find their
#: kernels by a name bound in the running process (:mod:`.simulator`).
BOUND_TARGET = ("simulator", "bound kernels")


class LaunchBackend:
    """The interface a backend implements. A *plan* is a
    :class:`~numba_cuda_launch.launch.plan.LaunchPlan`; *cfg* a
    configuration's :class:`~numba_cuda_launch.launch.launchconfig.ConfigValues`."""

    #: ``"driver"`` or ``"simulator"``: the launch target recorded in cached code
    name = ""
    #: Whether launches wait for device arrays' producer streams on the
    #: device (:mod:`..devicearray.producer_wait`).
    waits_for_producer_streams = True
    #: Whether kernels run on host memory (XLA:CPU takes ``jax_kernel`` calls)
    runs_on_host = False
    #: Whether device arrays are device memory (CUDA Array Interface and
    #: DLPack producers on a CUDA device, read as such)
    device_memory = True
    #: Why kernels have no image or driver handle here (``kernel_handle``), or None
    no_handles = None
    #: Whether kernels are compiled for the CUDA target (not run as Python)
    compiles_kernels = True

    def cache_target(self) -> tuple:
        """This process's launch target as cached code records it."""
        return (self.name,)

    def launches_by_name(self, kernels: Dict[str, Any]) -> Any:
        """A context in which launches of *kernels* ``{name: kernel}`` are
        lowered to find the kernel bound to the name in the process running
        them, so that the code holds no Python object and may be cached
        (the simulator's). The default: a context changing nothing, for
        backends whose code holds no Python object anyway (images)."""
        return contextlib.nullcontext()

    def runtime(self, context):
        """The emitters of synchronisation, events and graph operations for
        code lowered in *context* (``emit_stream_synchronize(builder,
        stream)``, ``emit_event_record(builder, payload, stream)``,
        ``emit_begin_capture(builder, stream, mode)``, ...: see
        :class:`.driver.DriverRuntime`)."""
        raise NotImplementedError("LaunchBackend.runtime")

    def stream_classes(self) -> tuple:
        """The classes of this target's own stream objects (numba-cuda's)."""
        return ()

    def stream_handle(self, stream) -> int:
        """The ``CUstream`` of one of this target's stream objects."""
        raise NotImplementedError("LaunchBackend.stream_handle")

    def array_classes(self) -> tuple:
        """The base classes of this target's own device arrays (their objects
        declare their type with ``_numba_type_``)."""
        return ()

    def fast_array_classes(self) -> tuple:
        """Those of :meth:`array_classes`' concrete classes whose fields
        compiled unboxing reads directly (numba-cuda's)."""
        return ()

    def on_python_classes(self, listener) -> None:
        """Call ``listener(streams, arrays, fast_arrays)`` with this target's
        classes of :meth:`stream_classes`, :meth:`array_classes` and
        :meth:`fast_array_classes`: those known now (default: all of them,
        once)."""
        listener(self.stream_classes(), self.array_classes(), self.fast_array_classes())

    def describe_array(self, obj):
        """``(data, shape, strides, dtype, readonly)`` of one of this
        target's arrays it reads itself, or None (read through its CUDA
        Array Interface)."""
        return None

    def run_kernel_function(self, name, *args) -> bool:
        """Run the Python body of kernel function *name* (``set_conditional``,
        ``griddepcontrol_wait``, ...) where kernels are Python; False (the
        default) where they are compiled: it was called outside a kernel."""
        return False

    def refusal(self, source, kernel) -> Optional[str]:
        """Why *kernel* of *source* cannot be launched in this process, or None."""
        return None

    def plan_parts(self, source, overload) -> Dict[str, Any]:
        """The :class:`LaunchPlan` fields this backend needs of *overload*
        (entry, image or live handle, parameter types, cooperative)."""
        raise NotImplementedError("LaunchBackend.plan_parts")

    #: whether a launch can take its kernel's image at run time, from an
    #: image record (:data:`~numba_cuda_launch.cudadrv.image.IMAGE_RECORD`)
    #: whose address the code is given: then one ``jax_kernel`` handler body
    #: serves every signature of one layout (docs/jax.md)
    launches_image_records = False

    def emit_launch(self, context, builder, plan, cfg, values, catch, image=None):
        """Emit the launch of *plan* with configuration *cfg* and *values*,
        already of the plan's argument types; return the ``CUresult``. With
        *catch* false, an error the backend can raise as a Python exception
        may propagate instead. *image*: the ``i8*`` of an image record whose
        kernel has the plan's parameter layout, launched instead of the
        plan's (only where :attr:`launches_image_records`)."""
        raise NotImplementedError("LaunchBackend.emit_launch")

    def emit_preload(self, context, builder, plan, image=None):
        """Emit loading the plan's kernel (or *image*'s, as for
        :meth:`emit_launch`) into the current context; the ``CUresult``."""
        raise NotImplementedError("LaunchBackend.emit_preload")

    def emit_function(self, context, builder, plan):
        """Emit getting the plan's ``CUfunction`` in the current context
        (loading it there): ``(status_ptr, function)``. Backends without
        driver functions answer occupancy queries with :meth:`emit_occupancy`."""
        raise NotImplementedError("LaunchBackend.emit_function")

    def emit_occupancy(self, builder, query, cfg, threads):
        """Emit the answer to occupancy *query* for *cfg* (blocks of
        *threads*, an ``i32``) without the driver: ``(CUresult, [values])``;
        None (the default) when the answer is the driver's."""
        return None

    def cluster_refusal(self) -> Optional[str]:
        """Why thread-block clusters cannot be used here, or None."""
        return None

    def orders_launches(self) -> bool:
        """True when each launch runs only after the one before it on its
        stream has completed (the simulator), so a dependent launch is a
        plain one and needs no architecture."""
        return False

    def emit_node_update(self, context, builder, plan, cfg, values, exe, node):
        """Emit setting kernel node *node* of executable graph *exe* to the
        launch of *plan* with *cfg* and *values*; return the ``CUresult``."""
        raise NotImplementedError("LaunchBackend.emit_node_update")

    def emit_node_checks(self, builder, guards, plan, cfg, node):
        """Emit the checks of such an update that the replay would launch
        the node as *cfg* would (default: none)."""

    def emit_launch_checks(self, context, builder, guards, plan, cfg, image=None):
        """Emit what must hold (or be made to hold) on the device before the
        plan's kernel is launched, or its launch recorded or queried:
        checks on *guards*. None by default; the driver backend raises the
        kernel's dynamic shared memory limit."""

    def emit_is_device_accessible(self, builder, address, host_allocated):
        """Emit whether a kernel may be given *address* (``i8*``); an ``i1``.
        *host_allocated* (an ``i1``) is true for the data of an array that
        carries a Numba meminfo (allocated on the host)."""
        raise NotImplementedError("LaunchBackend.emit_is_device_accessible")
