"""Environment for the test suite's child Python processes: they must import
the same numba_cuda_launch as the suite (this checkout's package, or under
NCL_TEST_PATCHED=1 the alias for a patched numba-cuda)."""

import os

from support import ROOT
PREAMBLE = ("import numpy as np\n"
            "if not hasattr(np, 'row_stack'):  # numba-cuda 0.30.4 with numpy 2.5\n"
            "    np.row_stack = np.vstack\n")


def child_env(**extra):
    """``os.environ`` with PYTHONPATH leading to the package under test."""
    first = os.path.join(ROOT, "tests", "_patched") \
        if os.environ.get("NCL_TEST_PATCHED") == "1" else ROOT
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=first + (os.pathsep + path if path else ""), **extra)
