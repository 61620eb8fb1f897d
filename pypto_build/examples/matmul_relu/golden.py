"""
Golden script of the matmul_relu example, in PyPTO's golden.py format.

Written by hand for pypto_build (not generated). Inputs come from a fixed
torch seed, so no data/ files are needed. They are quarter steps (k / 4), so
every product and partial sum of a @ b is exact in fp32: the result does not
depend on the summation order, and the kernels match torch bit for bit.
"""

import torch

__outputs__ = ['out']
RTOL = 1e-05
ATOL = 1e-05

def generate_inputs(params):
    """Generate inputs as a list of (name, value) tuples."""
    gen = torch.Generator().manual_seed(20240611)
    a = torch.round(torch.randn((16, 32), generator=gen, dtype=torch.float32) * 4) / 4
    b = torch.round(torch.randn((32, 16), generator=gen, dtype=torch.float32) * 4) / 4
    bias = torch.round(torch.randn((16,), generator=gen, dtype=torch.float32) * 4) / 4
    out = torch.zeros((16, 16), dtype=torch.float32)

    return [
        ("a", a),
        ("b", b),
        ("bias", bias),
        ("out", out),
    ]


def compute_golden(tensors, params):
    a = tensors["a"]
    b = tensors["b"]
    bias = tensors["bias"]
    tensors["out"][:] = torch.relu(a @ b + bias)
