"""kiln.nn.utils.fusion against torch.nn.utils.fusion: an eval-mode BatchNorm folded into the
convolution / Linear before it gives the unfused pair's output (in kiln) and torch's fused
weights, for conv1d / conv2d / a transposed conv, with and without biases and affine
parameters; training-mode modules are refused as torch refuses them."""
import numpy as np
import pytest
import torch

import kiln
import oracle


def _twins(make_t, make_k, gen):
    t, k = make_t(), make_k()
    for p in t.parameters():
        p.data.uniform_(-1, 1, generator=gen)
    for name, b in t.named_buffers():
        if name.endswith("running_mean"):
            b.uniform_(-1, 1, generator=gen)
        elif name.endswith("running_var"):
            b.uniform_(0.5, 2.0, generator=gen)
    k.load_state_dict({n: kiln.tensor(v.detach().numpy()) for n, v in t.state_dict().items()})
    t.eval()
    k.eval()
    return t, k


CASES = {
    "conv2d": (lambda L: L.nn.Conv2d(3, 5, 3), lambda L: L.nn.BatchNorm2d(5), (2, 3, 7, 7),
               False),
    "conv2d_nobias_noaffine": (lambda L: L.nn.Conv2d(3, 4, 1, bias=False),
                               lambda L: L.nn.BatchNorm2d(4, affine=False), (2, 3, 5, 5), False),
    "conv1d": (lambda L: L.nn.Conv1d(4, 6, 3, padding=1), lambda L: L.nn.BatchNorm1d(6),
               (3, 4, 9), False),
    "conv_transpose2d": (lambda L: L.nn.ConvTranspose2d(3, 4, 2, stride=2),
                         lambda L: L.nn.BatchNorm2d(4), (2, 3, 4, 4), True),
}


@pytest.mark.parametrize("name", list(CASES))
def test_fuse_conv_bn_eval(name):
    make_conv, make_bn, shape, transpose = CASES[name]
    g = torch.Generator().manual_seed(7)
    tc, kc = _twins(lambda: make_conv(torch), lambda: make_conv(kiln), g)
    tb, kb = _twins(lambda: make_bn(torch), lambda: make_bn(kiln), g)
    x = torch.randn(*shape, generator=g)
    kx = kiln.tensor(x.numpy())
    fused = kiln.nn.utils.fuse_conv_bn_eval(kc, kb, transpose=transpose)
    tfused = torch.nn.utils.fuse_conv_bn_eval(tc, tb, transpose=transpose)
    with kiln.no_grad():
        np.testing.assert_allclose(fused(kx).numpy(), kb(kc(kx)).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(fused.weight.detach().numpy(), tfused.weight.detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(fused.bias.detach().numpy(), tfused.bias.detach().numpy(),
                               rtol=1e-6, atol=1e-6)
    assert isinstance(fused.weight, kiln.nn.Parameter) and fused is not kc
    oracle.record("nn.fuse_conv_bn_eval_" + name)


def test_fuse_linear_bn_eval_and_training_refused():
    g = torch.Generator().manual_seed(8)
    tl, kl = _twins(lambda: torch.nn.Linear(5, 4), lambda: kiln.nn.Linear(5, 4), g)
    tb, kb = _twins(lambda: torch.nn.BatchNorm1d(4), lambda: kiln.nn.BatchNorm1d(4), g)
    x = torch.randn(6, 5, generator=g)
    fused = kiln.nn.utils.fuse_linear_bn_eval(kl, kb)
    tfused = torch.nn.utils.fuse_linear_bn_eval(tl, tb)
    with kiln.no_grad():
        np.testing.assert_allclose(fused(kiln.tensor(x.numpy())).numpy(),
                                   tfused(x).detach().numpy(), rtol=1e-5, atol=1e-5)
    kl.train()
    with pytest.raises(AssertionError):
        kiln.nn.utils.fuse_linear_bn_eval(kl, kb)
    with pytest.raises(AssertionError):
        kiln.nn.utils.fuse_conv_bn_eval(kiln.nn.Conv2d(1, 1, 1), kiln.nn.BatchNorm2d(1))
    oracle.record("nn.fuse_linear_bn_eval", 2)
