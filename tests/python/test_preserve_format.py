"""clone, `to` and the *_like factories keep their input's layout as PyTorch 2.13's
preserve_format does: a permutation of a contiguous layout keeps its strides, any other
strided layout gets dense strides in the same order (decision 0128). Strides and values are
compared with torch on the same views."""
import itertools

import numpy as np
import pytest
import torch

import kiln


def _pair(shape, seed):
    if 0 in shape:  # torch.from_numpy gives an empty array strides of 0
        return kiln.zeros(*shape), torch.zeros(*shape)
    base = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return kiln.from_numpy(base.copy()), torch.from_numpy(base.copy())


def _views():
    """(name, function) building the same view from a kiln and a torch tensor."""
    out = []
    for perm in itertools.permutations(range(3)):
        out.append((f"permute{perm}", (2, 3, 4), lambda t, p=perm: t.permute(*p)))
    out += [
        ("transpose", (5, 7), lambda t: t.t()),
        ("slice_rows", (6, 5), lambda t: t[::2]),
        ("slice_cols", (6, 5), lambda t: t[:, 1:4]),
        ("transposed_slice", (6, 8), lambda t: t.t()[::3]),
        ("permuted_slice", (4, 6, 5), lambda t: t.permute(2, 0, 1)[:, :, ::2]),
        ("expanded", (3, 1), lambda t: t.expand(3, 4)),
        ("expanded_transposed", (1, 4), lambda t: t.expand(3, 4).t()),
        ("size_one_dims", (1, 3, 1, 4), lambda t: t.permute(3, 2, 1, 0)),
        ("channels_last", (2, 3, 4, 5), lambda t: t.permute(0, 2, 3, 1).permute(0, 3, 1, 2)),
        ("channels_last_one_channel", (2, 1, 4, 5),
         lambda t: t.permute(0, 2, 3, 1).permute(0, 3, 1, 2)),
        ("empty_permuted", (0, 3, 2), lambda t: t.permute(2, 0, 1)),
        ("scalar", (), lambda t: t),
        ("diagonal", (4, 4), lambda t: t.diagonal()),
        ("strided_4d", (2, 4, 6, 8), lambda t: t[:, ::2, :, ::4].permute(0, 3, 1, 2)),
    ]
    return out


VIEWS = _views()
IDS = [v[0] for v in VIEWS]


@pytest.mark.parametrize("name,shape,view", VIEWS, ids=IDS)
def test_clone_keeps_strides_like_torch(name, shape, view):
    k, t = _pair(shape, len(name))
    kv, tv = view(k), view(t)
    kc, tc = kv.clone(), tv.clone()
    assert kc.stride() == tc.stride(), (kv.stride(), tv.stride())
    np.testing.assert_array_equal(kc.numpy(), tc.numpy())
    assert kc.storage_offset() == 0


@pytest.mark.parametrize("name,shape,view", VIEWS, ids=IDS)
def test_to_another_dtype_keeps_strides_like_torch(name, shape, view):
    k, t = _pair(shape, len(name) + 1)
    kv, tv = view(k), view(t)
    for kd, td in [(kiln.float64, torch.float64), (kiln.bfloat16, torch.bfloat16),
                   (kiln.int32, torch.int32)]:
        ko, to = kv.to(kd), tv.to(td)
        assert ko.stride() == to.stride(), (kd, kv.stride())
        np.testing.assert_array_equal(ko.float().numpy(), to.float().numpy())


@pytest.mark.parametrize("factory", ["empty_like", "zeros_like", "ones_like", "rand_like",
                                     "randn_like", "full_like", "randint_like"])
@pytest.mark.parametrize("name,shape,view", VIEWS, ids=IDS)
def test_like_factories_keep_strides_like_torch(factory, name, shape, view):
    k, t = _pair(shape, 3)
    kv, tv = view(k), view(t)
    extra = {"full_like": (2.5,), "randint_like": (7,)}.get(factory, ())
    ko = getattr(kiln, factory)(kv, *extra)
    to = getattr(torch, factory)(tv, *extra)
    assert ko.shape == tuple(to.shape) and ko.stride() == to.stride()
    if factory in ("zeros_like", "ones_like", "full_like"):
        np.testing.assert_array_equal(ko.numpy(), to.numpy())
    if factory == "randint_like":
        assert ko.numel() == 0 or (0 <= ko.numpy().min() and ko.numpy().max() < 7)


@pytest.mark.parametrize("fmt", ["contiguous_format", "channels_last", "preserve_format"])
def test_like_factories_follow_memory_format(fmt):
    k, t = _pair((2, 3, 4, 5), 9)
    kv, tv = k.permute(0, 2, 1, 3), t.permute(0, 2, 1, 3)
    ko = kiln.zeros_like(kv, memory_format=getattr(kiln, fmt))
    to = torch.zeros_like(tv, memory_format=getattr(torch, fmt))
    assert ko.stride() == to.stride()
    assert kiln.empty(2, 3, 4, 5, memory_format=kiln.channels_last).stride() == \
        torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_contiguous_and_clone_memory_formats_stay_row_major():
    k, _ = _pair((2, 3, 4), 4)
    kv = k.permute(2, 0, 1)
    assert kv.contiguous().is_contiguous()
    assert kv.clone(memory_format=kiln.contiguous_format).is_contiguous()
    assert kv.clone().stride() == kv.stride()
    np.testing.assert_array_equal(kv.contiguous().numpy(), kv.numpy())


def test_clone_of_a_permuted_tensor_has_its_own_gradient_path():
    k, t = _pair((3, 4), 5)
    kx, tx = k.requires_grad_(), t.requires_grad_()
    ky, ty = kx.t().clone(), tx.t().clone()
    assert ky.stride() == ty.stride()
    (ky * kiln.arange(3).float()).sum().backward()
    (ty * torch.arange(3).float()).sum().backward()
    np.testing.assert_array_equal(kx.grad.numpy(), tx.grad.numpy())
    assert kx.grad.stride() == tx.grad.stride()
