"""Launch backends: how a launch lowered from ``kernel[...](args...)`` is
carried out. :mod:`numba_cuda_launch.launch.call` hands the converted
arguments and the configuration's values to the backend that claims the
kernel: :mod:`.driver` (through the CUDA driver, one backend per kernel
compiler) or :mod:`.simulator` (numba-cuda's simulator, its CUDA graphs in
:mod:`.simgraph`). docs/architecture.md, step 5.
"""

__all__ = ["LaunchBackend", "register", "backend_for", "call_jitted"]


class LaunchBackend:
    """The interface a backend implements."""

    #: Whether launches wait for device arrays' producer streams on the
    #: device (:mod:`..producer_wait`); the simulator has no device streams.
    waits_for_producer_streams = True

    def claims(self, kernel):
        """True if this backend launches *kernel* (a compiled overload)."""
        raise NotImplementedError("LaunchBackend.claims")

    def emit_launch(self, context, builder, kernel, cfg, formal_types, values, catch):
        """Emit the launch of *kernel* with configuration *cfg* (its
        :class:`~numba_cuda_launch.launch.launchconfig.ConfigValues`)
        and *values*, already of the kernel's *formal_types*; return the
        ``CUresult``. With *catch* false, an error the backend can raise as a
        Python exception may propagate instead."""
        raise NotImplementedError("LaunchBackend.emit_launch")

    def emit_preload(self, context, builder, kernel):
        """Emit loading *kernel*'s code into the current context; return the
        ``CUresult``."""
        raise NotImplementedError("LaunchBackend.emit_preload")

    def emit_function(self, context, builder, kernel):
        """Emit getting *kernel*'s ``CUfunction`` in the current context
        (loading it there); return ``(status_ptr, function)``: a stack slot
        holding the ``CUresult`` and the handle (NULL on failure). Backends
        without driver functions (the simulator) do not implement it: they
        answer occupancy queries with :meth:`emit_occupancy`."""
        raise NotImplementedError("LaunchBackend.emit_function")

    def emit_occupancy(self, builder, query, cfg):
        """Emit the answer to occupancy *query* (a name of
        :data:`..occupancy.QUERIES`) for configuration *cfg* without the
        driver: ``(CUresult, [values])``; None (the default) when the answer
        is the driver's, asked through :meth:`emit_function`."""
        return None

    def emit_node_update(self, context, builder, kernel, cfg, formal_types, values, exe, node):
        """Emit setting the launch of kernel node *node* (``CUgraphNode``)
        of executable graph *exe* (``CUgraphExec``) to *kernel* with *cfg*'s
        grid, block and shared memory and *values*, as :meth:`emit_launch`
        would launch it; return the ``CUresult``."""
        raise NotImplementedError("LaunchBackend.emit_node_update")

    def emit_launch_checks(self, context, builder, guards, kernel, cfg):
        """Emit what must hold (or be made to hold) on the device before
        *kernel* is launched, or its launch recorded or queried, with
        configuration *cfg* (the configuration struct): checks on *guards*
        (:class:`~numba_cuda_launch.launch.guards.Guards`). None by default;
        the driver backend raises the kernel's dynamic shared memory limit."""

    def emit_argument_checks(self, context, builder, guards, ty, value, where):
        """Emit the checks the kernel's compiler makes of an argument *value*
        of formal type *ty* (*where* names the parameter for messages).
        None by default."""

    def emit_is_device_accessible(self, builder, address, host_allocated):
        """Emit whether a kernel may be given *address* (``i8*``); an
        ``i1``. *host_allocated* (an ``i1``) is true for the data of an array
        that carries a Numba meminfo (allocated on the host)."""
        raise NotImplementedError("LaunchBackend.emit_is_device_accessible")


_backends = []  # asked in order: the latest registration first


def register(backend):
    """Add *backend*; later registrations are asked first."""
    _backends.insert(0, backend)
    return backend


def backend_for(kernel):
    """The backend that launches *kernel* (a compiled overload)."""
    for backend in _backends:
        if backend.claims(kernel):
            return backend
    raise LookupError("no launch backend for %r" % (kernel,))


def call_jitted(context, builder, dispatcher, argtypes, args):
    """Emit a call of an ``@njit`` *dispatcher* from lowering code (its errors
    propagate to the caller, as for any call of a jitted function)."""
    fnty = context.typing_context.resolve_value_type(dispatcher)
    sig = fnty.get_call_type(context.typing_context, tuple(argtypes), {})
    return context.get_function(fnty, sig)(builder, args)
