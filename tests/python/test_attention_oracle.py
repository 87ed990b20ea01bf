"""scaled_dot_product_attention, MultiheadAttention and TransformerEncoderLayer/Encoder against
torch: randomized shapes with bool/float masks, causal attention (square and L != S), scale,
GQA; forward and backward in float32/float64 and forward in bfloat16; the modules on
identical weights (outputs, attention weights, input and parameter gradients); error
cases (same exception type)."""
import dataclasses

import numpy as np
import pytest
import torch

import kiln
import module_oracle
import oracle


def _F(L):
    return torch.nn.functional if L is torch else kiln.nn.functional


def _sdpa(L, q, k, v, *mask, **kw):
    return _F(L).scaled_dot_product_attention(q, k, v, *mask, **kw)


def sdpa_ops(n):
    rng = np.random.default_rng(600)
    ops = []
    for i in range(n):
        lead = tuple(int(v) for v in rng.integers(1, 3, int(rng.integers(0, 3))))
        heads = int(rng.choice([1, 2, 4]))
        L, S = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        E, Ev = int(rng.integers(1, 6)), int(rng.integers(1, 6))
        gqa = heads > 1 and rng.random() < 0.3
        hk = heads // 2 if gqa else heads
        q = lead + (heads, L, E)
        k = lead + (hk, S, E)
        v = lead + (hk, S, Ev)
        kw = {}
        if gqa:
            kw["enable_gqa"] = True
        if rng.random() < 0.3:
            kw["scale"] = float(rng.uniform(0.1, 1.0))
        mask_kind = rng.choice(["none", "float", "bool", "causal"])
        specs = (q, k, v)
        input_dtypes = None
        if mask_kind == "causal":
            kw["is_causal"] = True
        elif mask_kind in ("float", "bool"):
            mshape = (L, S) if rng.random() < 0.6 else (heads, L, S)
            specs = specs + (mshape,)
            if mask_kind == "bool":
                input_dtypes = (None, None, None, "bool")
        ops.append(oracle.Op("F.scaled_dot_product_attention", _sdpa, [specs], kwargs=[kw],
                             dtypes=["float32", "float64", "bfloat16"],
                             input_dtypes=input_dtypes, tol=4))
    return ops


OPS = sdpa_ops(24) + [
    oracle.Op("F.scaled_dot_product_attention", _sdpa, [((2, 3, 4, 5), (2, 3, 6, 5), (2, 3, 6, 2))],
              kwargs=[{}, {"is_causal": True}, {"scale": 0.3}],
              dtypes=["float32", "float64", "bfloat16"], tol=4),
    # Grouped-query attention with groups of 4 query heads (folded into rows, decision 0083's
    # note): one decoding step, a causal prefill, a [batch, 1, L, S] float mask.
    oracle.Op("F.scaled_dot_product_attention", _sdpa,
              [((2, 8, 1, 4), (2, 2, 7, 4), (2, 2, 7, 3)), ((1, 8, 5, 4), (1, 2, 5, 4), (1, 2, 5, 3)),
               ((2, 8, 3, 4), (2, 2, 6, 4), (2, 2, 6, 3), (2, 1, 3, 6))],
              kwargs=[{"enable_gqa": True}, {"enable_gqa": True, "is_causal": True},
                      {"enable_gqa": True}],
              dtypes=["float32", "float64", "bfloat16"], tol=4),
    # Unbatched 2-D inputs, and a float mask broadcast over the batch.
    oracle.Op("F.scaled_dot_product_attention", _sdpa, [((4, 3), (5, 3), (5, 2), (4, 5)),
                                                        (("t", (2, 4, 3)), (2, 5, 3), (2, 5, 2),
                                                         (1, 4, 5))],
              dtypes=["float32", "float64"], tol=4),
]


def _params(ops):
    out, seen = [], {}
    for op in ops:
        for d in op.dtypes:
            key = f"{op.name}-{d}"
            seen[key] = seen.get(key, -1) + 1
            out.append(pytest.param(op, d, id=f"{key}-{seen[key]}"))
    return out


@pytest.mark.parametrize("op,dtype", _params(OPS))
def test_sdpa_vs_torch(op, dtype):
    if dtype == "bfloat16":
        op = dataclasses.replace(op, grad=False, tol=op.tol * 2)
    oracle.run_op(op, dtype)


def test_sdpa_fully_masked_rows_give_zero():
    # torch 2.5+ (and kiln): a query whose keys are all masked out gets 0, not NaN.
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal(s).astype(np.float32) for s in ((1, 3, 4), (1, 5, 4),
                                                                    (1, 5, 2)))
    mask = np.ones((3, 5), dtype=bool)
    mask[1] = False
    res = {}
    for L in (torch, kiln):
        args = [L.tensor(a) for a in (q, k, v)]
        res[L] = _F(L).scaled_dot_product_attention(*args, attn_mask=L.tensor(mask))
    oracle.assert_same(res[kiln], res[torch], 4, where="sdpa fully masked row")
    oracle.record("F.scaled_dot_product_attention")


def test_sdpa_dropout_statistics():
    # dropout_p > 0 draws from kiln's generator (not torch's): compare statistics only.
    kiln.manual_seed(0)
    q = kiln.zeros(1, 1, 1, 4)
    k = kiln.zeros(1, 1, 400, 4)
    v = kiln.ones(1, 1, 400, 1)
    out = kiln.nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=0.25)
    # uniform weights 1/400; kept ones are scaled by 1/0.75, so the mean stays about 1
    assert abs(out.item() - 1.0) < 0.15
    oracle.record("F.scaled_dot_product_attention_dropout")


# --- modules -----------------------------------------------------------------------------

C = module_oracle.Case


def _mha(nw=True, avg=True, causal=False):
    def call(m, xs, L):
        q, k, v, *masks = xs
        kw = {"need_weights": nw, "average_attn_weights": avg}
        if len(masks) >= 1 and masks[0] is not None:
            kw["key_padding_mask"] = masks[0]
        if len(masks) >= 2:
            kw["attn_mask"] = masks[1]
        if causal:
            kw["is_causal"] = True
        return m(q, k, v, **kw)
    return call


def _self(call_kw=None):
    call_kw = call_kw or {}

    def call(m, xs, L):
        x, *rest = xs
        kw = dict(call_kw)
        names = [n for n in ("key_padding_mask", "attn_mask") if n in kw and kw[n] is None]
        for n, val in zip(names, rest):
            kw[n] = val
        if kw.get("attn_mask", 0) is None:
            del kw["attn_mask"]
        if kw.get("key_padding_mask", 0) is None:
            del kw["key_padding_mask"]
        return m(x, x, x, **kw)
    return call


MHA = "MultiheadAttention"
MODULE_CASES = [
    C(MHA, lambda nn: nn.MultiheadAttention(8, 2), [(5, 3, 8), (4, 3, 8), (4, 3, 8)],
      call=_mha(), grad_inputs=(0, 1, 2)),
    C(MHA + "_no_weights", lambda nn: nn.MultiheadAttention(8, 4), [(5, 3, 8), (4, 3, 8),
                                                                     (4, 3, 8)],
      call=_mha(nw=False), grad_inputs=(0, 1, 2)),
    C(MHA + "_per_head_weights", lambda nn: nn.MultiheadAttention(6, 3),
      [(4, 2, 6), (4, 2, 6), (4, 2, 6)], call=_mha(avg=False), grad_inputs=(0, 1, 2)),
    C(MHA + "_self", lambda nn: nn.MultiheadAttention(8, 2),
      [(5, 2, 8)], call=_self({"need_weights": False})),
    C(MHA + "_self_weights", lambda nn: nn.MultiheadAttention(8, 2),
      [(5, 2, 8)], call=_self()),
    C(MHA + "_batch_first", lambda nn: nn.MultiheadAttention(8, 2, batch_first=True),
      [(3, 5, 8), (3, 4, 8), (3, 4, 8)], call=_mha(), grad_inputs=(0, 1, 2)),
    C(MHA + "_batch_first_self", lambda nn: nn.MultiheadAttention(8, 4, batch_first=True),
      [(3, 5, 8)], call=_self({"need_weights": False})),
    C(MHA + "_kdim_vdim", lambda nn: nn.MultiheadAttention(8, 2, kdim=5, vdim=3),
      [(4, 2, 8), (6, 2, 5), (6, 2, 3)], call=_mha(), grad_inputs=(0, 1, 2)),
    C(MHA + "_kdim_vdim_sdpa", lambda nn: nn.MultiheadAttention(8, 2, kdim=5, vdim=3,
                                                                bias=False),
      [(4, 2, 8), (6, 2, 5), (6, 2, 3)], call=_mha(nw=False), grad_inputs=(0, 1, 2)),
    C(MHA + "_nobias", lambda nn: nn.MultiheadAttention(8, 2, bias=False),
      [(4, 2, 8), (4, 2, 8), (4, 2, 8)], call=_mha(), grad_inputs=(0,)),
    C(MHA + "_bias_kv_zero_attn",
      lambda nn: nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
      [(4, 2, 8), (5, 2, 8), (5, 2, 8)], call=_mha(), grad_inputs=(0, 1, 2)),
    C(MHA + "_bias_kv_masks",
      lambda nn: nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
      [(4, 2, 8), (5, 2, 8), (5, 2, 8), ("bool", (2, 5), 0.3), ("float_mask", (4, 5))],
      call=_mha(nw=False), grad_inputs=(0, 1, 2)),
    C(MHA + "_key_padding_mask", lambda nn: nn.MultiheadAttention(8, 2),
      [(4, 3, 8), (5, 3, 8), (5, 3, 8), ("bool", (3, 5), 0.4)], call=_mha(),
      grad_inputs=(0, 1, 2)),
    C(MHA + "_key_padding_mask_sdpa", lambda nn: nn.MultiheadAttention(8, 2),
      [(4, 3, 8), (5, 3, 8), (5, 3, 8), ("bool", (3, 5), 0.4)], call=_mha(nw=False),
      grad_inputs=(0, 1, 2)),
    C(MHA + "_attn_mask_bool", lambda nn: nn.MultiheadAttention(8, 2),
      [(4, 3, 8), (5, 3, 8), (5, 3, 8), None, ("bool", (4, 5), 0.3)], call=_mha(),
      grad_inputs=(0, 1, 2)),
    C(MHA + "_attn_mask_3d_float", lambda nn: nn.MultiheadAttention(8, 2),
      [(4, 3, 8), (5, 3, 8), (5, 3, 8), None, ("float_mask", (6, 4, 5))], call=_mha(nw=False),
      grad_inputs=(0, 1, 2)),
    C(MHA + "_causal_hint", lambda nn: nn.MultiheadAttention(8, 2),
      [(5, 2, 8), (5, 2, 8), (5, 2, 8), None, ("causal", 5)], call=_mha(nw=False, causal=True),
      grad_inputs=(0, 1, 2)),
    C(MHA + "_unbatched", lambda nn: nn.MultiheadAttention(8, 2),
      [(4, 8), (5, 8), (5, 8), ("bool", (5,), 0.3)], call=_mha(), grad_inputs=(0, 1, 2)),
    C(MHA + "_eval", lambda nn: nn.MultiheadAttention(8, 2, dropout=0.5),
      [(4, 2, 8), (4, 2, 8), (4, 2, 8)], call=_mha(nw=False), train=False,
      grad_inputs=(0, 1, 2)),
    C("TransformerEncoderLayer", lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
      [(5, 3, 8)]),
    C("TransformerEncoderLayer_gelu_norm_first",
      lambda nn: nn.TransformerEncoderLayer(8, 4, 12, dropout=0.0, activation="gelu",
                                            norm_first=True, batch_first=True),
      [(3, 5, 8)]),
    C("TransformerEncoderLayer_nobias_eps",
      lambda nn: nn.TransformerEncoderLayer(8, 2, 12, dropout=0.0, bias=False,
                                            layer_norm_eps=1e-3), [(4, 2, 8)]),
    C("TransformerEncoderLayer_masks",
      lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
      [(5, 3, 8), ("causal", 5), ("bool", (3, 5), 0.3)],
      call=lambda m, xs, L: m(xs[0], src_mask=xs[1], src_key_padding_mask=xs[2])),
    C("TransformerEncoderLayer_unbatched",
      lambda nn: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), [(5, 8)]),
    C("TransformerEncoder",
      lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0), 2,
                                       enable_nested_tensor=False),
      [(5, 2, 8)]),
    C("TransformerEncoder_norm_causal",
      lambda nn: nn.TransformerEncoder(
          nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True, norm_first=True),
          3, norm=nn.LayerNorm(8), enable_nested_tensor=False),
      [(2, 5, 8), ("causal", 5)], call=lambda m, xs, L: m(xs[0], mask=xs[1])),
    C("TransformerEncoder_eval",
      lambda nn: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.2), 2,
                                       enable_nested_tensor=False),
      [(5, 2, 8)], train=False),
    C("TransformerDecoderLayer", lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0),
      [(5, 3, 8), (4, 3, 8)], call=lambda m, xs, L: m(xs[0], xs[1]), grad_inputs=(0, 1)),
    C("TransformerDecoderLayer_gelu_norm_first",
      lambda nn: nn.TransformerDecoderLayer(8, 4, 12, dropout=0.0, activation="gelu",
                                            norm_first=True, batch_first=True),
      [(3, 5, 8), (3, 4, 8)], call=lambda m, xs, L: m(xs[0], xs[1]), grad_inputs=(0, 1)),
    C("TransformerDecoderLayer_masks",
      lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, bias=False),
      [(5, 3, 8), (4, 3, 8), ("causal", 5), ("bool", (3, 4), 0.3)],
      call=lambda m, xs, L: m(xs[0], xs[1], tgt_mask=xs[2], memory_key_padding_mask=xs[3]),
      grad_inputs=(0, 1)),
    C("TransformerDecoderLayer_unbatched",
      lambda nn: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), [(5, 8), (3, 8)],
      call=lambda m, xs, L: m(xs[0], xs[1]), grad_inputs=(0, 1)),
    C("TransformerDecoder_norm_causal",
      lambda nn: nn.TransformerDecoder(nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0), 2,
                                       norm=nn.LayerNorm(8)),
      [(5, 2, 8), (6, 2, 8), ("causal", 5)],
      call=lambda m, xs, L: m(xs[0], xs[1], tgt_mask=xs[2]), grad_inputs=(0, 1)),
    C("Transformer",
      lambda nn: nn.Transformer(8, 2, 2, 1, 16, dropout=0.0),
      [(5, 3, 8), (4, 3, 8)], call=lambda m, xs, L: m(xs[0], xs[1]), grad_inputs=(0, 1)),
    C("Transformer_batch_first_causal",
      lambda nn: nn.Transformer(8, 4, 1, 2, 12, dropout=0.0, batch_first=True,
                                norm_first=True, activation="gelu"),
      [(2, 6, 8), (2, 4, 8), ("causal", 4)],
      call=lambda m, xs, L: m(xs[0], xs[1], tgt_mask=xs[2]), grad_inputs=(0, 1)),
    C("Transformer_eval", lambda nn: nn.Transformer(8, 2, 1, 1, 16, dropout=0.3),
      [(5, 2, 8), (3, 2, 8)], call=lambda m, xs, L: m(xs[0], xs[1]), train=False),
]


def _fix_inputs(case):
    # None placeholders in the input list stand for an absent key_padding_mask.
    if None not in case.inputs:
        return case
    idx = case.inputs.index(None)
    inputs = [x for x in case.inputs if x is not None]
    call = case.call

    def wrapped(m, xs, L, _call=call, _idx=idx):
        return _call(m, list(xs[:_idx]) + [None] + list(xs[_idx:]), L)
    return dataclasses.replace(case, inputs=inputs, call=wrapped)


MODULE_CASES = [_fix_inputs(c) for c in MODULE_CASES]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", MODULE_CASES, ids=[c.name for c in MODULE_CASES])
def test_attention_modules_vs_torch(case, dtype):
    module_oracle.run(case, dtype)


def test_mha_state_dict_from_torch_and_init():
    # A torch state_dict loads into kiln as is (keys, shapes); the init matches torch's rules.
    tm = torch.nn.MultiheadAttention(6, 2, add_bias_kv=True, kdim=4, vdim=5)
    km = kiln.nn.MultiheadAttention(6, 2, add_bias_kv=True, kdim=4, vdim=5)
    assert list(km.state_dict()) == list(tm.state_dict())
    km.load_state_dict({k: kiln.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    k2 = kiln.nn.MultiheadAttention(6, 2)
    assert not k2.in_proj_bias.detach().numpy().any()
    assert not k2.out_proj.bias.detach().numpy().any()
    bound = np.sqrt(6.0 / (6 + 18))  # xavier_uniform on [3E, E]
    assert np.abs(k2.in_proj_weight.detach().numpy()).max() <= bound + 1e-7
    oracle.record("nn.MultiheadAttention_state_dict")


ERRORS = {
    "sdpa_causal_and_mask": lambda nn, L, F: F.scaled_dot_product_attention(
        L.ones(1, 2, 3), L.ones(1, 2, 3), L.ones(1, 2, 3), attn_mask=L.ones(2, 2),
        is_causal=True),
    "sdpa_embed_mismatch": lambda nn, L, F: F.scaled_dot_product_attention(
        L.ones(1, 2, 3), L.ones(1, 2, 4), L.ones(1, 2, 3)),
    "sdpa_seq_mismatch": lambda nn, L, F: F.scaled_dot_product_attention(
        L.ones(1, 2, 3), L.ones(1, 4, 3), L.ones(1, 2, 3)),
    "sdpa_int_mask": lambda nn, L, F: F.scaled_dot_product_attention(
        L.ones(1, 2, 3), L.ones(1, 2, 3), L.ones(1, 2, 3), attn_mask=L.ones(2, 2, dtype=L.int64)),
    "MHA_not_divisible": lambda nn, L, F: nn.MultiheadAttention(5, 2),
    "MHA_zero_heads": lambda nn, L, F: nn.MultiheadAttention(4, 0),
    "MHA_causal_without_mask": lambda nn, L, F: nn.MultiheadAttention(4, 2)(
        L.ones(3, 1, 4), L.ones(3, 1, 4), L.ones(3, 1, 4), is_causal=True),
    "MHA_bad_mask_shape": lambda nn, L, F: nn.MultiheadAttention(4, 2)(
        L.ones(3, 1, 4), L.ones(3, 1, 4), L.ones(3, 1, 4), attn_mask=L.zeros(2, 2)),
    "MHA_int_key_padding_mask": lambda nn, L, F: nn.MultiheadAttention(4, 2)(
        L.ones(3, 1, 4), L.ones(3, 1, 4), L.ones(3, 1, 4),
        key_padding_mask=L.zeros(1, 3, dtype=L.int64)),
    "MHA_query_dims": lambda nn, L, F: nn.MultiheadAttention(4, 2)(
        L.ones(4), L.ones(4), L.ones(4)),
    "MHA_embed_dim": lambda nn, L, F: nn.MultiheadAttention(4, 2)(
        L.ones(3, 1, 6), L.ones(3, 1, 6), L.ones(3, 1, 6)),
    "TransformerEncoderLayer_activation": lambda nn, L, F: nn.TransformerEncoderLayer(
        4, 2, activation="tanh"),
}


@pytest.mark.parametrize("name", list(ERRORS))
def test_attention_errors_vs_torch(name):
    module_oracle.errors_agree(name, ERRORS[name])
    oracle.record("nn.attention_errors")
