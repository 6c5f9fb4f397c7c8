"""Packaging for numba-cuda-launch (metadata here; version in one place)."""

import os
import re

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(HERE, "numba_cuda_launch", "_version.py")) as f:
    VERSION = re.search(r'__version__ = "([^"]+)"', f.read()).group(1)
with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
    LONG_DESCRIPTION = f.read()

setup(
    name="numba-cuda-launch",
    version=VERSION,
    description="Launch numba-cuda and numba-cuda-mlir kernels from @cfunc and @njit code with "
    "kernel[grid, block, stream, sharedmem](...)",
    long_description=LONG_DESCRIPTION,
    long_description_content_type="text/markdown",
    license="BSD-2-Clause",
    packages=find_packages(include=["numba_cuda_launch", "numba_cuda_launch.*"]),
    # the C runtime of libraries built by numba_cuda_launch.aot; PEP 561: the
    # modules' own type hints are for type checkers too.
    package_data={"numba_cuda_launch": ["py.typed"],
                  "numba_cuda_launch.interop": ["clib/*.c"]},
    entry_points={"console_scripts": [
        "numba-cuda-launch-aot = numba_cuda_launch.interop.aot:main"]},
    python_requires=">=3.10",
    # Numba itself; the kernel compiler comes with an extra: numba-cuda-mlir
    # ([mlir], [mlir-cu12]) or numba-cuda ([cu13], [cu12]), or both
    # (README.md, "numba-cuda or numba-cuda-mlir").
    install_requires=["numba>=0.62", "numpy"],
    extras_require={
        # numba-cuda with its CUDA compiler libraries. numpy 2.5 removed
        # np.row_stack, which numba-cuda 0.30.4 still calls when compiling any
        # kernel: kept below it where numba-cuda is installed.
        "cu12": ["numba-cuda[cu12]>=0.26", "numpy<2.5"],
        "cu13": ["numba-cuda[cu13]>=0.26", "numpy<2.5"],
        # numba-cuda-mlir with its CUDA compiler libraries (docs/numba-cuda-mlir.md);
        # it needs Python 3.11+
        "mlir": ["numba-cuda-mlir[cu13]>=0.6; python_version >= '3.11'"],
        "mlir-cu12": ["numba-cuda-mlir[cu12]>=0.6; python_version >= '3.11'"],
        # mypy: the package's type check (pyproject.toml) and tests/test_type_hints.py
        "test": ["pytest", "pytest-xdist", "mypy==2.4.1"],
        # flatbuffers: jax.export serialization (jax does not require it)
        "jax": ["jax>=0.6", "flatbuffers"],
        # kernels as TVM-FFI functions (docs/tvm-ffi.md); jax-tvm-ffi calls them
        # inside jax.jit and needs Python 3.11+
        "tvm-ffi": ["apache-tvm-ffi>=0.1.15",
                    "jax-tvm-ffi>=0.1.3; python_version >= '3.11'"],
    },
    project_urls={
        # The request the package answers, and the projects it builds on.
        "Request (jax#1870)": "https://github.com/jax-ml/jax/issues/1870",
        "numba-cuda": "https://github.com/NVIDIA/numba-cuda",
        "numba-cuda-mlir": "https://github.com/NVIDIA/numba-cuda-mlir",
    },
    classifiers=[
        "Programming Language :: Python :: 3",
        "Environment :: GPU :: NVIDIA CUDA",
    ],
)
