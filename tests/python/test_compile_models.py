"""kiln.compile on the benchmark suite's models (benchmarks/models.py: BERT, GPT-2, ResNet-50,
at reduced sizes): compiled forwards equal eager ones bit for bit, float32 and bfloat16, over
several inputs (DESIGN: compiled results must equal eager results on every model of the model
suite)."""
import os
import sys
import types

import numpy as np
import pytest

import kiln

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import models  # noqa: E402


CFG = types.SimpleNamespace(bert_vocab=300, vocab=300, d=64, bert_layers=2, gpt2_layers=2,
                            heads=4)


def same(a, b):
    x, y = np.asarray(a.float().numpy()), np.asarray(b.float().numpy())
    assert x.shape == y.shape and np.array_equal(x, y, equal_nan=True), np.max(np.abs(x - y))


def built(builder, dtype):
    kiln.manual_seed(0)
    model = builder(kiln, CFG).eval()
    twin = builder(kiln, CFG).eval()
    twin.load_state_dict(model.state_dict())
    return model.to(dtype), twin.to(dtype)


@pytest.mark.parametrize("dtype", [kiln.float32, kiln.bfloat16])
@pytest.mark.parametrize("name", ["bert", "gpt2", "resnet"])
def test_model_suite_compiled_equals_eager(name, dtype):
    builder = {"bert": models.bert_cls, "gpt2": models.gpt2_cls,
               "resnet": models.resnet50_cls}[name]
    model, twin = built(builder, dtype)
    compiled = kiln.compile(model)
    with kiln.inference_mode():
        for seed in range(3):
            kiln.manual_seed(seed + 10)
            if name == "resnet":
                x = kiln.randn(1, 3, 32, 32).to(dtype)
            else:
                x = kiln.randint(0, CFG.vocab, (1, 16))
            same(compiled(x), twin(x))
    assert compiled._compiled_forward.replays == 2
