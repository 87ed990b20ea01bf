"""kiln.utils.data (datasets, samplers, DataLoader, default_collate) against
torch.utils.data, and kiln.save / kiln.load against safetensors.torch (files written by one
must load in the other, every dtype, values bit-equal)."""
import collections

import numpy as np
import pytest
import safetensors.torch
import torch
import torch.utils.data as tud

import kiln
import kiln.utils.data as kud
import oracle


def _same_structure(k, t, where=""):
    if isinstance(t, torch.Tensor):
        oracle.assert_same(k, t, where=where)
    elif isinstance(t, dict):
        assert isinstance(k, dict) and list(k) == list(t), where
        for key in t:
            _same_structure(k[key], t[key], f"{where}.{key}")
    elif isinstance(t, (list, tuple)):
        assert type(k) is type(t) and len(k) == len(t), (where, type(k), type(t))
        for i, (a, b) in enumerate(zip(k, t)):
            _same_structure(a, b, f"{where}[{i}]")
    else:
        assert k == t, where


def _both_tensor_dataset(n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    y = np.arange(n, dtype=np.int64)
    return (kud.TensorDataset(kiln.tensor(x), kiln.tensor(y)),
            tud.TensorDataset(torch.tensor(x), torch.tensor(y)))


@pytest.mark.parametrize("batch_size,drop_last", [(1, False), (3, False), (3, True), (10, False),
                                                  (4, True), (None, False)])
def test_dataloader_sequential_vs_torch(batch_size, drop_last):
    kd, td = _both_tensor_dataset()
    kl = kud.DataLoader(kd, batch_size=batch_size, drop_last=drop_last)
    tl = tud.DataLoader(td, batch_size=batch_size, drop_last=drop_last)
    assert len(kl) == len(tl)
    kb, tb = list(kl), list(tl)
    assert len(kb) == len(tb)
    for a, b in zip(kb, tb):
        _same_structure(a, b)
    oracle.record("data.DataLoader", len(tb))


def test_dataloader_shuffle_generator():
    kd, _ = _both_tensor_dataset(17)
    runs = []
    for _ in range(2):
        g = kiln.Generator()
        g.manual_seed(123)
        loader = kud.DataLoader(kd, batch_size=5, shuffle=True, generator=g)
        runs.append([b[1].tolist() for b in loader])
    assert runs[0] == runs[1]  # same seed, same order
    flat = sorted(i for b in runs[0] for i in b)
    assert flat == list(range(17)) and [len(b) for b in runs[0]] == [5, 5, 5, 2]
    assert [i for b in runs[0] for i in b] != list(range(17))
    # a second epoch draws a new permutation
    g = kiln.Generator()
    g.manual_seed(123)
    loader = kud.DataLoader(kd, batch_size=17, shuffle=True, generator=g)
    e1, e2 = [next(iter(loader))[1].tolist() for _ in range(2)]
    assert e1 != e2 and sorted(e1) == sorted(e2)
    oracle.record("data.shuffle", 3)


def test_default_collate_vs_torch():
    samples = [
        [{"a": np.float32(i), "b": (i, float(i) / 2, [i, i + 1]), "s": f"x{i}",
          "t": np.arange(3, dtype=np.float64) + i, "flag": i % 2 == 0} for i in range(4)],
        [(i, 2.5 * i) for i in range(3)],
        [collections.namedtuple("P", "x y")(i, [i * 1.0]) for i in range(3)],
    ]
    for batch in samples:
        tb = tud.default_collate(batch)
        kb = kud.default_collate([_to_kiln(s) for s in batch])
        _same_structure(kb, tb)
    kt = kud.default_collate([kiln.ones(2, 3), kiln.zeros(2, 3)])
    assert tuple(kt.shape) == (2, 2, 3)
    oracle.record("data.default_collate", 4)


def _to_kiln(x):
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, dict):
        return {k: _to_kiln(v) for k, v in x.items()}
    return x


def test_samplers_vs_torch():
    data = list(range(11))
    for bs, dl in [(3, False), (3, True), (11, True), (20, False)]:
        kb = list(kud.BatchSampler(kud.SequentialSampler(data), bs, dl))
        tb = list(tud.BatchSampler(tud.SequentialSampler(data), bs, dl))
        assert kb == tb and len(kud.BatchSampler(kud.SequentialSampler(data), bs, dl)) == len(tb)
    g = kiln.Generator()
    g.manual_seed(7)
    r = list(kud.RandomSampler(data, generator=g))
    assert sorted(r) == data
    r2 = list(kud.RandomSampler(data, replacement=True, num_samples=40, generator=g))
    assert len(r2) == 40 and all(0 <= i < 11 for i in r2)
    with pytest.raises(ValueError):
        kud.BatchSampler(kud.SequentialSampler(data), 0, False)
    with pytest.raises(ValueError):
        tud.BatchSampler(tud.SequentialSampler(data), 0, False)
    with pytest.raises(ValueError):
        kud.DataLoader(data, sampler=kud.SequentialSampler(data), shuffle=True)
    oracle.record("data.samplers", 7)


def test_custom_dataset_and_collate():
    class Squares(kud.Dataset):
        def __len__(self):
            return 7

        def __getitem__(self, i):
            return kiln.tensor([float(i)]), i * i

    loader = kud.DataLoader(Squares(), batch_size=3,
                            collate_fn=lambda b: [s[1] for s in b])
    assert list(loader) == [[0, 1, 4], [9, 16, 25], [36]]
    x, y = next(iter(kud.DataLoader(Squares(), batch_size=4)))
    assert tuple(x.shape) == (4, 1) and y.dtype == kiln.int64 and y.tolist() == [0, 1, 4, 9]
    parts = kud.random_split(Squares(), [3, 4])
    assert sorted(int(p[1] ** 0.5 + 0.5) for part in parts for p in part) == list(range(7))

    class Stream(kud.IterableDataset):
        def __iter__(self):
            return iter(range(5))
    assert [b.tolist() for b in kud.DataLoader(Stream(), batch_size=2)] == [[0, 1], [2, 3], [4]]
    oracle.record("data.custom", 4)


# --- safetensors ------------------------------------------------------------------------------

DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8",
          "uint8", "bool"]


def _arrays(rng):
    out = {}
    for i, d in enumerate(DTYPES):
        shape = [(3, 4), (5,), (), (2, 0), (2, 3, 2)][i % 5]
        a = oracle.gen_array(rng, shape, d, "real")
        out[f"t.{d}"] = (a, d)
    return out


def test_kiln_save_loads_in_safetensors(tmp_path):
    rng = np.random.default_rng(0)
    arrays = _arrays(rng)
    ksd = {k: kiln.tensor(a, dtype=getattr(kiln, d)) for k, (a, d) in arrays.items()}
    ksd["noncontig"] = kiln.arange(12.0).reshape(3, 4).t()
    path = tmp_path / "k.safetensors"
    kiln.save(ksd, str(path))
    loaded = safetensors.torch.load_file(str(path))
    assert sorted(loaded) == sorted(ksd)
    for k, v in ksd.items():
        oracle.assert_same(v, loaded[k], where=k)
    oracle.record("io.save", len(ksd))


def test_safetensors_file_loads_in_kiln(tmp_path):
    rng = np.random.default_rng(1)
    arrays = _arrays(rng)
    tsd = {k: torch.tensor(a, dtype=getattr(torch, d)) for k, (a, d) in arrays.items()}
    path = tmp_path / "t.safetensors"
    safetensors.torch.save_file(tsd, str(path), metadata={"format": "pt"})
    loaded = kiln.load(str(path))
    assert sorted(loaded) == sorted(tsd)
    for k, v in tsd.items():
        oracle.assert_same(loaded[k], v, where=k)
    oracle.record("io.load", len(tsd))


def test_model_checkpoint_roundtrip(tmp_path):
    def make(nn):
        return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 2))
    km = make(kiln.nn)
    km.train()
    km(kiln.randn(5, 4))  # running stats and num_batches_tracked change
    path = str(tmp_path / "model.safetensors")
    kiln.save(km.state_dict(), path)
    tm = make(torch.nn)
    tm.load_state_dict(safetensors.torch.load_file(path))
    km.eval()
    tm.eval()
    x = np.random.default_rng(2).normal(size=(3, 4)).astype(np.float32)
    oracle.assert_same(km(kiln.tensor(x)), tm(torch.tensor(x)), 10)
    # and back: torch's file into a fresh kiln model
    path2 = str(tmp_path / "torch.safetensors")
    safetensors.torch.save_file(tm.state_dict(), path2)
    km2 = make(kiln.nn)
    km2.load_state_dict(kiln.load(path2))
    km2.eval()
    oracle.assert_same(km2(kiln.tensor(x)), tm(torch.tensor(x)), 10)
    oracle.record("io.checkpoint", 2)


def test_save_errors(tmp_path):
    # (a .safetensors target takes only a dict of tensors; other paths get torch's format)
    with pytest.raises(TypeError):
        kiln.save({"a": 1}, str(tmp_path / "x.safetensors"))
    with pytest.raises(TypeError):
        kiln.save([kiln.ones(2)], str(tmp_path / "x.safetensors"))
    with pytest.raises(Exception):
        kiln.load(str(tmp_path / "missing.safetensors"))
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not json}      ")
    with pytest.raises(Exception):
        kiln.load(str(bad))
    oracle.record("io.errors", 4)
