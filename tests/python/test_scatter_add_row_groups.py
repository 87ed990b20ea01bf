"""scatter_add of 16-bit floats along dim 0 with an index constant along each row
(expand(index[:, None]), the embedding's gradient): the source rows grouped by target row and
summed in float32 (decision 0125's follow-up in indexing_kernels.cpp), against PyTorch 2.13 and
float64: repeated targets, an index narrower than the output, a non-zero self, an embedding's
bfloat16 gradient, and out-of-range targets as errors (PyTorch's RuntimeError)."""
import numpy as np
import pytest
import torch

import kiln


def _k(t, dtype):
    return kiln.from_numpy(t.float().numpy().copy()).to(getattr(kiln, dtype))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("rows,cols,targets,width", [(300, 64, 50, 64), (4000, 33, 7, 20),
                                                     (5, 3, 1000, 3), (2048, 96, 512, 96)])
def test_row_scatter_add_matches_float64(dtype, rows, cols, targets, width):
    g = torch.Generator().manual_seed(rows + cols)
    td = getattr(torch, dtype)
    self_ = torch.randn(targets, cols, generator=g).to(td)
    src = torch.randn(rows, width, generator=g).to(td)
    idx = torch.randint(0, targets, (rows,), generator=g)
    # The torch references take the index contiguous: PyTorch 2.13 scatters an expanded
    # (stride-0) index narrower than self into the columns past it as well.
    index = idx[:, None].expand(rows, width).contiguous()
    want = self_.double().scatter_add(0, index, src.double())
    got = _k(self_, dtype).scatter_add(0, kiln.from_numpy(idx.numpy())[:, None].expand(rows, width),
                                       _k(src, dtype))
    assert got.dtype == getattr(kiln, dtype)
    # One rounding of a float32 sum: half a step of the 16-bit type, plus float32's own error.
    step = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    np.testing.assert_allclose(got.float().numpy(), want.numpy(), rtol=step, atol=1e-6 * rows)
    torch_got = self_.scatter_add(0, index, src)
    np.testing.assert_allclose(got.float().numpy(), torch_got.float().numpy(), rtol=4 * step,
                               atol=1e-3)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("layout", ["transposed", "expanded"])
def test_row_scatter_add_of_a_strided_source(dtype, layout):
    # Sources whose rows are not contiguous: a transposed one, and one value per row expanded
    # with stride 0 (the gradient of embedding(...).sum()).
    g = torch.Generator().manual_seed(3)
    td = getattr(torch, dtype)
    rows, targets, width = 700, 90, 40
    self_ = torch.randn(targets, width, generator=g).to(td)
    if layout == "transposed":
        base = torch.randn(width, rows, generator=g).to(td)
        src, ksrc = base.t(), _k(base, dtype).t()
    else:
        base = torch.randn(rows, 1, generator=g).to(td)
        src, ksrc = base.expand(rows, width), _k(base, dtype).expand(rows, width)
    idx = torch.randint(0, targets, (rows,), generator=g)
    index = idx[:, None].expand(rows, width).contiguous()
    want = self_.double().scatter_add(0, index, src.double())
    got = _k(self_, dtype).scatter_add(0, kiln.from_numpy(idx.numpy())[:, None].expand(rows, width),
                                       ksrc)
    step = 2.0 ** -8 if dtype == "bfloat16" else 2.0 ** -11
    np.testing.assert_allclose(got.float().numpy(), want.numpy(), rtol=step, atol=1e-6 * rows)


def test_bfloat16_embedding_gradient_of_a_sum():
    g = torch.Generator().manual_seed(4)
    w = torch.randn(500, 32, generator=g).bfloat16()
    idx = torch.randint(0, 500, (2, 400), generator=g)
    kw = _k(w, "bfloat16").requires_grad_()
    kiln.nn.functional.embedding(kiln.from_numpy(idx.numpy()), kw).sum().backward()
    counts = np.bincount(idx.reshape(-1).numpy(), minlength=500).astype(np.float64)
    np.testing.assert_array_equal(kw.grad.float().numpy(), np.repeat(counts[:, None], 32, 1))


def test_bfloat16_embedding_gradient_matches_torch():
    g = torch.Generator().manual_seed(9)
    w = torch.randn(1000, 48, generator=g).bfloat16().requires_grad_()
    idx = torch.randint(0, 1000, (6, 300), generator=g)
    gy = torch.randn(6, 300, 48, generator=g).bfloat16()
    torch.nn.functional.embedding(idx, w).backward(gy)
    kw = _k(w.detach(), "bfloat16").requires_grad_()
    kiln.nn.functional.embedding(kiln.from_numpy(idx.numpy()), kw).backward(_k(gy, "bfloat16"))
    exact = torch.zeros(1000, 48, dtype=torch.float64).index_add_(
        0, idx.reshape(-1), gy.double().reshape(-1, 48))
    np.testing.assert_allclose(kw.grad.float().numpy(), exact.numpy(), rtol=2.0 ** -8,
                               atol=1e-5)


def test_out_of_range_target_is_an_error():
    src = kiln.ones([4, 3]).to(kiln.bfloat16)
    index = kiln.from_numpy(np.array([0, 5, 1, 2]))[:, None].expand(4, 3)
    # RuntimeError, as PyTorch's scatter_add raises.
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 0"):
        kiln.zeros([5, 3]).to(kiln.bfloat16).scatter_add(0, index, src)
    with pytest.raises(RuntimeError, match="out of bounds"):
        kiln.zeros([5, 3]).to(kiln.bfloat16).scatter_add(
            0, kiln.from_numpy(np.array([0, -1, 1, 2]))[:, None].expand(4, 3), src)
