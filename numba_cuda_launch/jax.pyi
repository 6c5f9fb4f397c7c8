# Type hints of numba_cuda_launch.jax (PEP 561); tests/test_public_modules.py
# checks these against the module.

from typing import Any, Callable, Mapping, Sequence

from numba_cuda_launch.interop.jax import JaxKernel as JaxKernel

__all__: list[str]

def jax_kernel(kernel: Any, out_shapes: Any, launch: Any, *, scalars: Sequence[str] | None = None,
               sharedmem: int = 0, input_output_aliases: Mapping[int, int] | None = None,
               vmap_method: str = "sequential", command_buffer: bool = True,
               name: str | None = None,
               signatures: Any = None, dependent: bool = False) -> JaxKernel: ...
def export(fun: Callable[..., Any], *, disabled_checks: Sequence[Any] = (),
           **kwargs: Any) -> Callable[..., Any]: ...
def deserialize(blob: bytes | bytearray) -> Any: ...
def disabled_checks() -> list[Any]: ...
def registered_targets() -> list[str]: ...
def missing_targets(exported: Any) -> list[str]: ...
