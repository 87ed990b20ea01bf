"""Shared helpers of the xpu test files: moving values between kiln and torch (bfloat16 as
its float32 values) and the seeded-inputs fixture."""
import numpy as np
import pytest
import torch

import kiln

XPU = "xpu"


@pytest.fixture(autouse=True)
def seeded():
    """Every test draws the same inputs on every run."""
    torch.manual_seed(0)


def k2t(x):
    """A kiln tensor (any device) as a CPU torch tensor; bfloat16 as its float32 values."""
    x = x.detach().cpu()
    return torch.from_numpy(np.array(x.float().numpy() if x.dtype == kiln.bfloat16 else x.numpy()))


def t2k(t, device=XPU):
    """A torch tensor as a kiln tensor on device (bfloat16 kept as bfloat16)."""
    if t.dtype == torch.bfloat16:
        return kiln.tensor(t.float().numpy()).to(kiln.bfloat16).to(device)
    return kiln.tensor(t.numpy()).to(device)
