# Type hints of numba_cuda_launch.aot (PEP 561). tests/test_public_modules.py
# checks these against the module.

from typing import Any, Iterable, Mapping, Optional, Sequence

from numba_cuda_launch.interop.aot import AotBuildError as AotBuildError
from numba_cuda_launch.interop.aot import Library as Library

__all__: list[str]

ABI_VERSION: int

def build(path: str, functions: Optional[Mapping[str, Any]] = None, *,
          header: Optional[str] = None, prefix: Optional[str] = None,
          jax_kernels: Iterable[Any] = (), cpu: Optional[str] = None) -> Library: ...
def check_library(path: str) -> None: ...
def main(argv: Optional[Sequence[str]] = None) -> int: ...
