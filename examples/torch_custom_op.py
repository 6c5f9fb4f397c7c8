"""A PyTorch custom op whose body launches a Numba kernel from compiled code,
used inside a torch.compile'd function.

    .venv/bin/python examples/torch_custom_op.py      (needs a GPU and PyTorch)
"""

import numpy as np
from numba import cuda, njit

try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("torch_custom_op: needs a GPU and PyTorch with CUDA; skipped here")
    raise SystemExit(0)

import numba_cuda_launch  # noqa: F401


@cuda.jit
def gelu_like(x, out):
    i = cuda.grid(1)
    if i < out.size:
        v = x[i]
        out[i] = v / (1 + 2.718281828 ** (-1.702 * v))


@njit
def launch(x, out, stream):
    gelu_like[(out.size + 255) // 256, 256, stream](x, out)


@torch.library.custom_op("numba_cuda_launch_example::gelu", mutates_args=())
def gelu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    launch(x, out, torch.cuda.current_stream())  # tensors and stream go in as they are
    return out


@gelu.register_fake
def _(x):
    return torch.empty_like(x)


@torch.compile(fullgraph=True)
def model(x):
    return gelu(x * 2) + 1


if __name__ == "__main__":
    x = torch.randn(4096, device="cuda")
    got = model(x)
    want = (x * 2) * torch.sigmoid(1.702 * (x * 2)) + 1
    print("torch.compile with a Numba-kernel custom op: correct",
          bool(torch.allclose(got, want, atol=1e-5)))
