"""kiln.nn.attention against torch 2.13 on the same inputs: flex_attention outputs / lse /
max_scores vs torch's eager CPU flex_attention (forward only: torch's CPU flex_attention has
no backward), gradients vs torch's scaled_dot_product_attention given the equivalent dense
additive bias (mask -> -inf) built by torch's autograd; create_block_mask / create_mask /
BlockMask metadata vs torch's; sdpa_kernel backend selection and errors vs torch's;
CausalBias variants (outputs and gradients) vs torch's."""
import threading
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as TF
import torch.nn.attention as TA
import torch.nn.attention.bias as TB
import torch.nn.attention.flex_attention as TFX

import kiln
import kiln.nn.attention as KA
import kiln.nn.attention.bias as KB
import kiln.nn.attention.flex_attention as KFX
import kiln.nn.functional as KF

pytestmark = [
    pytest.mark.filterwarnings("ignore:.*flex_attention called without torch.compile"),
    pytest.mark.filterwarnings("ignore:return_lse is deprecated:FutureWarning"),
    pytest.mark.filterwarnings("ignore:Flash attention kernel not used"),
]

DTYPES = ["float32", "float64"]
TOL = {"float32": dict(rtol=2e-4, atol=2e-5), "float64": dict(rtol=1e-10, atol=1e-12)}


def K(a):
    return kiln.from_numpy(np.ascontiguousarray(a))


def T(a):
    return torch.from_numpy(np.ascontiguousarray(a))


def kn(t):
    return t.detach().to(kiln.float64).numpy()


def tn(t):
    return t.detach().to(torch.float64).numpy()


def qkv(B=2, Hq=4, Hkv=4, L=12, S=12, E=8, Ev=8, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, Hq, L, E)), rng.standard_normal((B, Hkv, S, E)),
            rng.standard_normal((B, Hkv, S, Ev)))


# --- mask / score mods, written once for both libraries (captured tensors per library) -----

def causal(b, h, q, kv):
    return q >= kv


def sliding(window):
    def sliding_window(b, h, q, kv):
        return (q >= kv) & (q - kv <= window)
    return sliding_window


def prefix_lm(prefix):
    def prefix_mask(b, h, q, kv):
        return (kv < prefix) | (q >= kv)
    return prefix_mask


def document(doc_ids):
    def doc_mask(b, h, q, kv):
        return (doc_ids[b, q] == doc_ids[b, kv]) & (q >= kv)
    return doc_mask


def alibi(slopes):
    def alibi_mod(score, b, h, q, kv):
        return score + slopes[h] * (kv - q)
    return alibi_mod


def table_bias(table, S):
    def rel_bias(score, b, h, q, kv):
        return score + table[h, q - kv + (S - 1)]
    return rel_bias


def softcap(score, b, h, q, kv):
    return 20.0 * (score / 20.0).tanh()


def lower_right(L, S):
    def lr(b, h, q, kv):
        return q + (S - L) >= kv
    return lr


def doc_ids_np(B, L):
    # batch 0: documents of 5, 4, 3 tokens; batch 1: one document then another
    ids = np.zeros((B, L), dtype=np.int64)
    ids[0] = np.repeat([0, 1, 2], [5, 4, L - 9])
    ids[1] = np.repeat([0, 1], [7, L - 7])
    return ids


# Each case: (shape kwargs, builder(lib_tensor) -> (score_mod or None, mask_mod or None,
# captured parameter as numpy or None), enable_gqa)
def case(name, L=12, S=12, Hq=4, Hkv=4):
    rng = np.random.default_rng(7)
    shape = dict(L=L, S=S, Hq=Hq, Hkv=Hkv)
    gqa = Hq != Hkv
    if name == "none":
        return shape, lambda lib: (None, None), None, gqa
    if name == "causal":
        return shape, lambda lib: (None, causal), None, gqa
    if name == "sliding":
        return shape, lambda lib: (None, sliding(3)), None, gqa
    if name == "prefix_lm":
        return shape, lambda lib: (None, prefix_lm(4)), None, gqa
    if name == "document":
        ids = doc_ids_np(2, L)
        return shape, lambda lib, ids=ids: (None, document(lib(ids))), None, gqa
    if name == "alibi":
        slopes = 2.0 ** -np.arange(1, Hq + 1)
        return shape, lambda lib, s=slopes: (alibi(lib(s)), causal), None, gqa
    if name == "softcap":
        return shape, lambda lib: (softcap, sliding(5)), None, gqa
    if name == "lower_right":
        return shape, lambda lib: (None, lower_right(L, S)), None, gqa
    if name == "table":
        tab = rng.standard_normal((Hq, L + S - 1)) * 0.5
        return shape, None, tab, gqa
    raise KeyError(name)


CASES = [("none", {}), ("causal", {}), ("sliding", {}), ("prefix_lm", {}), ("document", {}),
         ("alibi", {}), ("softcap", {}), ("causal", dict(Hq=4, Hkv=2)),
         ("sliding", dict(Hq=6, Hkv=2)), ("lower_right", dict(L=5, S=13)),
         ("causal", dict(L=13, S=6)), ("table", {}), ("table", dict(L=7, S=11, Hkv=1))]


def build(name, shape, lib):
    """(score_mod, mask_mod) of a case for library `lib` (K or T); 'table' is built by the
    callers, which own the captured (learnable) table."""
    return case(name, **shape)[1](lib)


def run_kiln(name, shape, q, k, v, dtype, tab=None, grad=False, B=2):
    kd = getattr(kiln, dtype)
    kq, kk, kv = (K(x).to(kd).requires_grad_(grad) for x in (q, k, v))
    ktab = None
    if tab is not None:
        ktab = K(tab).to(kd).requires_grad_(grad)
        score_mod, mask_mod = table_bias(ktab, shape.get("S", 12)), causal
    else:
        score_mod, mask_mod = build(name, shape, K)
    bm = None
    if mask_mod is not None:
        bm = KFX.create_block_mask(mask_mod, B, None, q.shape[2], k.shape[2], BLOCK_SIZE=4)
    out, aux = KFX.flex_attention(kq, kk, kv, score_mod=score_mod, block_mask=bm,
                                  enable_gqa=q.shape[1] != k.shape[1],
                                  return_aux=KFX.AuxRequest(lse=True, max_scores=True))
    return (kq, kk, kv, ktab), out, aux


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,shape", CASES, ids=[f"{n}-{i}" for i, (n, _) in
                                                   enumerate(CASES)])
def test_flex_forward_matches_torch_flex(name, shape, dtype):
    _, _, tab, gqa = case(name, **shape)
    q, k, v = qkv(Hq=shape.get("Hq", 4), Hkv=shape.get("Hkv", 4), L=shape.get("L", 12),
                  S=shape.get("S", 12))
    _, out, aux = run_kiln(name, shape, q, k, v, dtype, tab)
    td = getattr(torch, dtype)
    if tab is not None:
        score_mod, mask_mod = table_bias(T(tab).to(td), shape.get("S", 12)), causal
    else:
        score_mod, mask_mod = build(name, shape, T)
    bm = None if mask_mod is None else TFX.create_block_mask(
        mask_mod, 2, None, q.shape[2], k.shape[2], device="cpu", BLOCK_SIZE=4)
    tout, taux = TFX.flex_attention(T(q).to(td), T(k).to(td), T(v).to(td),
                                    score_mod=score_mod, block_mask=bm, enable_gqa=gqa,
                                    return_aux=TFX.AuxRequest(lse=True))
    # torch's CPU flex_attention cannot return max_scores: its definition, by hand
    tq, tk = T(q).to(td), T(k).to(td).repeat_interleave(q.shape[1] // k.shape[1], 1)
    B, H, L, S = 2, q.shape[1], q.shape[2], k.shape[2]
    grids = (torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1),
             torch.arange(L).view(1, 1, L, 1), torch.arange(S).view(1, 1, 1, S))
    sc = tq @ tk.transpose(-2, -1) / np.sqrt(q.shape[-1])
    sc = sc if score_mod is None else score_mod(sc, *grids)
    sc = sc if mask_mod is None else torch.where(mask_mod(*grids), sc, float("-inf"))
    assert out.dtype == getattr(kiln, dtype) and tuple(out.shape) == tuple(tout.shape)
    assert str(aux.lse.dtype).split(".")[1] == str(taux.lse.dtype).split(".")[1]
    np.testing.assert_allclose(kn(out), tn(tout), **TOL[dtype])
    np.testing.assert_allclose(kn(aux.lse), tn(taux.lse), **TOL[dtype])
    np.testing.assert_allclose(kn(aux.max_scores), tn(sc.amax(-1)), **TOL[dtype])


def torch_dense_reference(name, shape, q, k, v, dtype, tab=None):
    """torch SDPA with the dense additive bias (score_mod(0) + mask -> -inf), by autograd."""
    td = getattr(torch, dtype)
    tq, tk, tv = (T(x).to(td).requires_grad_() for x in (q, k, v))
    ttab = None
    B, H, L, S = q.shape[0], q.shape[1], q.shape[2], k.shape[2]
    b, h, qi, kvi = (torch.arange(B).view(B, 1, 1, 1), torch.arange(H).view(1, H, 1, 1),
                     torch.arange(L).view(1, 1, L, 1), torch.arange(S).view(1, 1, 1, S))
    if tab is not None:
        ttab = T(tab).to(td).requires_grad_()
        score_mod, mask_mod = table_bias(ttab, S), causal
    else:
        score_mod, mask_mod = build(name, shape, T)
    bias = torch.zeros(B, H, L, S, dtype=td)
    if score_mod is not None:  # these score mods are all score + f(b, h, q, kv)
        bias = score_mod(bias, b, h, qi, kvi).expand(B, H, L, S).to(td)
    if mask_mod is not None:
        bias = torch.where(mask_mod(b, h, qi, kvi), bias, float("-inf"))
    out = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=bias,
                                          enable_gqa=tq.shape[1] != tk.shape[1])
    return (tq, tk, tv, ttab), out


GRAD_CASES = [c for c in CASES if c[0] != "softcap"]  # softcap is not an additive bias


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,shape", GRAD_CASES, ids=[f"{n}-{i}" for i, (n, _) in
                                                        enumerate(GRAD_CASES)])
def test_flex_gradients_match_torch_sdpa_with_dense_bias(name, shape, dtype):
    _, _, tab, _ = case(name, **shape)
    q, k, v = qkv(Hq=shape.get("Hq", 4), Hkv=shape.get("Hkv", 4), L=shape.get("L", 12),
                  S=shape.get("S", 12), seed=3)
    kins, out, _ = run_kiln(name, shape, q, k, v, dtype, tab, grad=True)
    tins, tout = torch_dense_reference(name, shape, q, k, v, dtype, tab)
    g = np.random.default_rng(1).standard_normal(tout.shape)
    (out * K(g).to(out.dtype)).sum().backward()
    (tout * T(g).to(tout.dtype)).sum().backward()
    np.testing.assert_allclose(kn(out), tn(tout), **TOL[dtype])
    for ki, ti in zip(kins, tins):
        if ti is None:
            assert ki is None
            continue
        np.testing.assert_allclose(kn(ki.grad), tn(ti.grad), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_softcap_gradient_and_lse_gradient_match_torch_autograd(dtype):
    """A non-additive score_mod and a loss through the lse: torch's own math (autograd)."""
    td, kd = getattr(torch, dtype), getattr(kiln, dtype)
    q, k, v = qkv(L=9, S=11, seed=5)
    kq, kk, kv = (K(x).to(kd).requires_grad_() for x in (q, k, v))
    tq, tk, tv = (T(x).to(td).requires_grad_() for x in (q, k, v))
    mask = prefix_lm(3)
    bm = KFX.create_block_mask(mask, None, None, 9, 11, BLOCK_SIZE=(4, 8))
    out, lse = KFX.flex_attention(kq, kk, kv, score_mod=softcap, block_mask=bm, scale=0.3,
                                  return_lse=True)
    qi, kvi = torch.arange(9).view(1, 1, 9, 1), torch.arange(11).view(1, 1, 1, 11)
    s = softcap(tq @ tk.transpose(-2, -1) * 0.3, None, None, qi, kvi)
    s = torch.where(mask(None, None, qi, kvi), s, float("-inf"))
    tout, tlse = torch.softmax(s, -1) @ tv, torch.logsumexp(s, -1)
    (out.sum() + (lse * lse).sum()).backward()
    (tout.sum() + (tlse * tlse).sum()).backward()
    for a, b in [(out, tout), (lse, tlse), (kq.grad, tq.grad), (kk.grad, tk.grad),
                 (kv.grad, tv.grad)]:
        np.testing.assert_allclose(kn(a), tn(b), **TOL[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
def test_fully_masked_rows_give_zero_and_minus_inf_lse(dtype):
    td, kd = getattr(torch, dtype), getattr(kiln, dtype)
    q, k, v = qkv(L=8, S=8, seed=2)

    def some_rows_empty(b, h, q, kv):
        return (q >= kv) & (q % 3 != 1)
    kq, kk, kv = (K(x).to(kd).requires_grad_() for x in (q, k, v))
    kbm = KFX.create_block_mask(some_rows_empty, 2, 4, 8, 8, BLOCK_SIZE=2)
    out, lse = KFX.flex_attention(kq, kk, kv, block_mask=kbm, return_lse=True)
    tbm = TFX.create_block_mask(some_rows_empty, 2, 4, 8, 8, device="cpu", BLOCK_SIZE=2)
    tout, tlse = TFX.flex_attention(T(q).to(td), T(k).to(td), T(v).to(td), block_mask=tbm,
                                    return_lse=True)
    np.testing.assert_allclose(kn(out), tn(tout), **TOL[dtype])
    np.testing.assert_array_equal(np.isneginf(kn(lse)), np.isneginf(tn(tlse)))
    assert np.isneginf(kn(lse)[:, :, [1, 4, 7]]).all()
    assert (kn(out)[:, :, [1, 4, 7]] == 0).all()
    np.testing.assert_allclose(kn(lse), tn(tlse), **TOL[dtype])
    (out.sum() + lse.masked_fill(lse.isneginf(), 0.0).sum()).backward()
    assert np.isfinite(kn(kq.grad)).all() and (kn(kq.grad)[:, :, [1, 4, 7]] == 0).all()
    assert np.isfinite(kn(kk.grad)).all() and np.isfinite(kn(kv.grad)).all()


def test_batch_broadcast_kv_and_scale_and_value_dim():
    q, k, v = qkv(B=3, L=6, S=10, Ev=5, seed=4)
    k, v = k[:1], v[:1]
    kbm = KFX.create_block_mask(causal, 3, None, 6, 10, BLOCK_SIZE=4)
    tbm = TFX.create_block_mask(causal, 3, None, 6, 10, device="cpu", BLOCK_SIZE=4)
    out = KFX.flex_attention(K(q), K(k), K(v), block_mask=kbm, scale=0.7)
    tout = TFX.flex_attention(T(q), T(k), T(v), block_mask=tbm, scale=0.7)
    np.testing.assert_allclose(kn(out), tn(tout), **TOL["float64"])


# --- masks and BlockMask ---------------------------------------------------------------------

MASKS = [("causal", causal), ("sliding", sliding(5)), ("prefix", prefix_lm(7)),
         ("lower_right", lower_right(19, 37)), ("noop", KFX.noop_mask)]


@pytest.mark.parametrize("B,H", [(None, None), (2, 3)])
@pytest.mark.parametrize("block", [4, (8, 4), 128])
@pytest.mark.parametrize("mname,mask", MASKS, ids=[m for m, _ in MASKS])
def test_block_mask_metadata_matches_torch(mname, mask, block, B, H):
    tmask = TFX.noop_mask if mask is KFX.noop_mask else mask
    kbm = KFX.create_block_mask(mask, B, H, 19, 37, BLOCK_SIZE=block)
    tbm = TFX.create_block_mask(tmask, B, H, 19, 37, device="cpu", BLOCK_SIZE=block)
    assert kbm.shape == tbm.shape and kbm.BLOCK_SIZE == tbm.BLOCK_SIZE
    assert kbm.seq_lengths == tbm.seq_lengths
    for name in ["kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
                 "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices"]:
        a, b = getattr(kbm, name), getattr(tbm, name)
        assert a.dtype == kiln.int32 and tuple(a.shape) == tuple(b.shape), name
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)
    np.testing.assert_array_equal(kbm.to_dense().numpy(), tbm.to_dense().numpy())
    assert kbm.sparsity() == pytest.approx(tbm.sparsity(), abs=1e-9)
    assert kbm.numel() == tbm.numel()
    assert str(kbm) == str(tbm)
    assert kbm.to_string(grid_size=2, limit=2) == tbm.to_string(grid_size=2, limit=2)
    assert repr(kbm).replace("kiln.", "torch.") == repr(tbm)


def test_block_mask_without_separate_full_blocks_and_slicing():
    kbm = KFX.create_block_mask(causal, 2, 2, 16, 16, BLOCK_SIZE=4, separate_full_blocks=False)
    tbm = TFX.create_block_mask(causal, 2, 2, 16, 16, device="cpu", BLOCK_SIZE=4,
                                separate_full_blocks=False)
    assert kbm.full_kv_num_blocks is None and tbm.full_kv_num_blocks is None
    np.testing.assert_array_equal(kbm.kv_indices.numpy(), tbm.kv_indices.numpy())
    assert kbm.sparsity() == pytest.approx(tbm.sparsity())
    kbm = KFX.create_block_mask(sliding(4), 2, 2, 16, 16, BLOCK_SIZE=4)
    tbm = TFX.create_block_mask(sliding(4), 2, 2, 16, 16, device="cpu", BLOCK_SIZE=4)
    for idx in [1, (0, 1), (slice(0, 2), -1), (1, slice(None), slice(1, 3))]:
        ks, ts = kbm[idx], tbm[idx]
        assert ks.shape == ts.shape
        np.testing.assert_array_equal(ks.to_dense().numpy(), ts.to_dense().numpy())
        np.testing.assert_array_equal(ks.q_indices.numpy(), ts.q_indices.numpy())
        assert ks.sparsity() == pytest.approx(ts.sparsity())
    x = K(np.zeros((2, 2, 16, 8)))
    with pytest.raises(RuntimeError, match="sliced BlockMask"):
        KFX.flex_attention(x, x, x, block_mask=kbm[0])


def test_from_kv_blocks_masks_skipped_tiles():
    """A hand-built BlockMask: tiles it does not list are masked, mask_mod applies inside."""
    num = K(np.array([[[1, 2]]], dtype=np.int32))
    idx = K(np.array([[[[0, 1], [1, 0]]]], dtype=np.int32))
    kbm = KFX.BlockMask.from_kv_blocks(num, idx, BLOCK_SIZE=4, mask_mod=causal)
    tbm = TFX.BlockMask.from_kv_blocks(T(num.numpy()), T(idx.numpy()), BLOCK_SIZE=4,
                                       mask_mod=causal)
    assert kbm.shape == tbm.shape == (1, 1, 8, 8)
    np.testing.assert_array_equal(kbm.q_indices.numpy(), tbm.q_indices.numpy())
    np.testing.assert_array_equal(kbm.to_dense().numpy(), tbm.to_dense().numpy())
    q, k, v = qkv(B=1, Hq=1, Hkv=1, L=8, S=8, seed=9)
    out = KFX.flex_attention(K(q), K(k), K(v), block_mask=kbm)
    # tile (0, 0) listed, (1, 0) and (1, 1) listed: here that is exactly causal
    ref = TF.scaled_dot_product_attention(T(q), T(k), T(v), is_causal=True)
    np.testing.assert_allclose(kn(out), tn(ref), **TOL["float64"])


@pytest.mark.parametrize("fn", ["and", "or"])
def test_create_mask_and_combinators_match_torch(fn):
    kc = getattr(KFX, f"{fn}_masks")(causal, sliding(2), prefix_lm(3))
    tc = getattr(TFX, f"{fn}_masks")(causal, sliding(2), prefix_lm(3))
    km, tm = KFX.create_mask(kc, 2, 3, 9, 11), TFX.create_mask(tc, 2, 3, 9, 11, "cpu")
    assert km.dtype == kiln.bool and tuple(km.shape) == tuple(tm.shape) == (2, 3, 9, 11)
    np.testing.assert_array_equal(km.numpy(), tm.numpy())
    ids = doc_ids_np(2, 12)
    km = KFX.create_mask(document(K(ids)), 2, None, 12, 12)
    tm = TFX.create_mask(document(T(ids)), 2, None, 12, 12, "cpu")
    np.testing.assert_array_equal(km.numpy(), tm.numpy())
    km = KFX.create_mask(KFX.noop_mask, None, None, 3, 4)
    np.testing.assert_array_equal(km.numpy(), TFX.create_mask(TFX.noop_mask, None, None, 3, 4,
                                                              "cpu").numpy())

    def neg_inf_mod(score, b, h, q, kv):
        return score.masked_fill(q < kv, float("-inf"))
    np.testing.assert_array_equal(KFX.create_mask(neg_inf_mod, 1, 1, 5, 6).numpy(),
                                  TFX.create_mask(neg_inf_mod, 1, 1, 5, 6, "cpu").numpy())
    with pytest.raises(RuntimeError, match="callable"):
        KFX.and_masks(causal, 3)


def test_flex_validation_errors_as_torch():
    x = K(np.zeros((1, 4, 8, 8)))
    y = K(np.zeros((1, 2, 8, 8)))
    with pytest.raises(ValueError, match="enable_gqa=True"):
        KFX.flex_attention(x, y, y)
    with pytest.raises(ValueError, match="multiple of kv heads"):
        KFX.flex_attention(x, K(np.zeros((1, 3, 8, 8))), K(np.zeros((1, 3, 8, 8))),
                           enable_gqa=True)
    with pytest.raises(NotImplementedError, match="4D"):
        KFX.flex_attention(x[0], x[0], x[0])
    with pytest.raises(ValueError, match="smaller length"):
        KFX.flex_attention(x, x, x, block_mask=KFX.create_block_mask(causal, 1, 1, 4, 8))
    with pytest.raises(ValueError, match="larger length"):
        KFX.flex_attention(x, x, x, block_mask=KFX.create_block_mask(causal, 1, 1, 16, 8))
    with pytest.raises(ValueError, match="return_aux"):
        KFX.flex_attention(x, x, x, return_lse=True, return_aux=KFX.AuxRequest(lse=True))
    with pytest.raises(ValueError, match="same batch size"):
        KFX.flex_attention(K(np.zeros((2, 4, 8, 8))), x, x)
    with pytest.raises(AssertionError, match="4 or 5"):
        KFX.create_block_mask(lambda a, b: a, 1, 1, 4, 4)
    with pytest.raises(AssertionError, match="mask_mod"):
        KFX.create_block_mask(softcap, 1, 1, 4, 4)
    with pytest.warns(FutureWarning, match="return_lse is deprecated"):
        KFX.flex_attention(x, x, x, return_lse=True)
    out, aux = KFX.flex_attention(x, x, x, return_aux=KFX.AuxRequest())
    assert aux.lse is None and aux.max_scores is None


# --- sdpa_kernel -------------------------------------------------------------------------------

B = KA.SDPBackend
TBK = TA.SDPBackend


def test_sdp_backend_enum_matches_torch():
    names = ["ERROR", "MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION",
             "OVERRIDEABLE"]
    assert [m.name for m in B] == names
    for n in names:
        assert int(getattr(B, n)) == int(getattr(TBK, n))
        assert repr(getattr(B, n)) == repr(getattr(TBK, n))
    assert KA.WARN_FOR_UNFUSED_KERNELS is False


def _sdpa_inputs():
    q, k, v = qkv(L=5, S=7, seed=11)
    return (K(q), K(k), K(v)), (T(q), T(k), T(v))


SDPA_CALLS = {
    "plain": lambda F, x: F.scaled_dot_product_attention(*x),
    "causal": lambda F, x: F.scaled_dot_product_attention(*x, is_causal=True),
    "dropout": lambda F, x: F.scaled_dot_product_attention(*x, dropout_p=0.5),
    "3d": lambda F, x: F.scaled_dot_product_attention(*(t[0] for t in x)),
    "ev": lambda F, x: F.scaled_dot_product_attention(x[0], x[1], x[2][..., :5]),
    "gqa": lambda F, x: F.scaled_dot_product_attention(x[0], x[1][:, :2], x[2][:, :2],
                                                       enable_gqa=True),
    "bcast": lambda F, x: F.scaled_dot_product_attention(x[0], x[1][:1], x[2][:1]),
    "mask3d": lambda F, x: F.scaled_dot_product_attention(*x, attn_mask=x[0][0, :, :, :1]
                                                          * x[1][0, :, :, 0][:, None]),
}
BACKEND_SETS = [["MATH"], ["FLASH_ATTENTION"], ["EFFICIENT_ATTENTION"], ["CUDNN_ATTENTION"],
                ["OVERRIDEABLE"], ["ERROR"], [], ["EFFICIENT_ATTENTION", "FLASH_ATTENTION"],
                ["CUDNN_ATTENTION", "MATH"]]


@pytest.mark.parametrize("backends", BACKEND_SETS, ids=["+".join(b) or "none"
                                                        for b in BACKEND_SETS])
def test_sdpa_kernel_selection_and_errors_match_torch(backends):
    kx, tx = _sdpa_inputs()
    for call_name, call in SDPA_CALLS.items():
        results = []
        for F, A, Bk, x in [(KF, KA, B, kx), (TF, TA, TBK, tx)]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    with A.sdpa_kernel([getattr(Bk, n) for n in backends]):
                        out = call(F, x)
                    results.append(("ok", None if call_name == "dropout" else
                                    out.detach().numpy()))
                except RuntimeError as e:
                    results.append(("error", str(e)))
        (ks, kv), (ts, tv) = results
        assert ks == ts, (call_name, results)
        if ks == "error":
            assert kv == tv
        elif kv is not None:
            np.testing.assert_allclose(kv, tv, rtol=1e-5, atol=1e-6)


def test_sdpa_kernel_state_restore_priority_nesting_and_threads():
    assert KF._sdpa_backend_check is None
    assert KA._cur_sdpa_kernel_backends() == [B(int(b)) for b in TA._cur_sdpa_kernel_backends()]
    assert KA._cur_sdpa_kernel_backends(True) == \
        [B(int(b)) for b in TA._cur_sdpa_kernel_backends(True)]
    kx, _ = _sdpa_inputs()
    seen = {}

    def other_thread():
        try:
            KF.scaled_dot_product_attention(*kx)
            seen["other"] = "ok"
        except RuntimeError as e:
            seen["other"] = str(e)
    with KA.sdpa_kernel([B.CUDNN_ATTENTION, B.MATH], set_priority=True), \
            TA.sdpa_kernel([TBK.CUDNN_ATTENTION, TBK.MATH], set_priority=True):
        assert KA._cur_sdpa_kernel_backends(True) == \
            [B(int(b)) for b in TA._cur_sdpa_kernel_backends(True)]
        with KA.sdpa_kernel(B.EFFICIENT_ATTENTION):
            with pytest.raises(RuntimeError, match="No viable backend"):
                KF.scaled_dot_product_attention(*kx)
            # kiln keeps the choice per thread (torch: process-wide)
            t = threading.Thread(target=other_thread)
            t.start()
            t.join()
        assert seen["other"] == "ok"
        KF.scaled_dot_product_attention(*kx)
        assert KF._sdpa_backend_check is not None
    assert KF._sdpa_backend_check is None
    assert KA._cur_sdpa_kernel_backends(True) == \
        [B(int(b)) for b in TA._cur_sdpa_kernel_backends(True)]
    with pytest.raises(AssertionError, match="SDPBackend"):
        with KA.sdpa_kernel("math"):
            pass
    with pytest.raises(RuntimeError, match="No available kernel.  Aborting"):
        with KA.sdpa_kernel(B.FLASH_ATTENTION):
            KF.scaled_dot_product_attention(*kx, dropout_p=0.1)
    assert KA._cur_sdpa_kernel_backends() == [B(int(b)) for b in TA._cur_sdpa_kernel_backends()]


# --- CausalBias -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("variant", ["upper_left", "lower_right"])
@pytest.mark.parametrize("L,S,Hkv", [(6, 6, 4), (4, 9, 4), (9, 4, 4), (5, 8, 2)])
def test_causal_bias_outputs_and_gradients_match_torch(variant, L, S, Hkv, dtype):
    td, kd = getattr(torch, dtype), getattr(kiln, dtype)
    q, k, v = qkv(L=L, S=S, Hkv=Hkv, seed=L * S)
    kq, kk, kv = (K(x).to(kd).requires_grad_() for x in (q, k, v))
    tq, tk, tv = (T(x).to(td).requires_grad_() for x in (q, k, v))
    with warnings.catch_warnings(record=True) as kw:
        warnings.simplefilter("always")
        kb = getattr(KB, f"causal_{variant}")(L, S)
    with warnings.catch_warnings(record=True) as tw:
        warnings.simplefilter("always")
        tb = getattr(TB, f"causal_{variant}")(L, S)
    assert [str(w.message) for w in kw] == [str(w.message) for w in tw]
    np.testing.assert_array_equal(kb._materialize().numpy(), tb._materialize().numpy())
    assert kb.variant == tb.variant and int(kb.variant) == int(tb.variant)
    assert repr(kb).replace("tensor", "") == repr(tb).replace("tensor", "")
    gqa = Hkv != 4
    out = KF.scaled_dot_product_attention(kq, kk, kv, attn_mask=kb, enable_gqa=gqa)
    tout = TF.scaled_dot_product_attention(tq, tk, tv, attn_mask=tb, enable_gqa=gqa)
    g = np.random.default_rng(0).standard_normal(tout.shape)
    (out * K(g).to(kd)).sum().backward()
    (tout * T(g).to(td)).sum().backward()
    for a, b in [(out, tout), (kq.grad, tq.grad), (kk.grad, tk.grad), (kv.grad, tv.grad)]:
        np.testing.assert_allclose(kn(a), tn(b), **TOL[dtype])


def test_causal_bias_errors_and_backend_check():
    kx, _ = _sdpa_inputs()
    kb = KB.causal_lower_right(5, 7)
    with pytest.raises(ValueError, match="causal=True"):
        KF.scaled_dot_product_attention(*kx, attn_mask=kb, is_causal=True)
    with pytest.raises(AssertionError, match="2D"):
        KB.causal_upper_left(2, 3, 4)
    with pytest.raises(AssertionError, match="CausalVariant"):
        KB.CausalBias(1, 2, 3)
    with pytest.raises(TypeError, match="attn_mask"):
        KF.scaled_dot_product_attention(*kx, attn_mask=np.zeros((5, 7)))
    with KA.sdpa_kernel(B.CUDNN_ATTENTION):  # the bias goes through the same check
        with pytest.raises(RuntimeError, match="No viable backend"):
            KF.scaled_dot_product_attention(*kx, attn_mask=kb)
    with KA.sdpa_kernel(B.FLASH_ATTENTION):
        KF.scaled_dot_product_attention(*kx, attn_mask=kb)
