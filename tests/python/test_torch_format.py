"""kiln.save / kiln.load in torch's checkpoint format (decision 0103), against torch 2.13:
files written by kiln.save load in torch.load (weights_only True and False) and back,
torch.save's files (zip and legacy) load in kiln, views share storages as in torch,
map_location as torch's, globals outside the weights-only set are refused, and damaged
files give clear errors."""
import collections
import io
import os
import pickle
import pickletools
import random
import struct
import time
import zipfile

import numpy as np
import pytest
import safetensors.torch
import torch

import kiln

DTYPES = ["bfloat16", "float16", "bool", "int8", "uint8", "int16", "int32", "int64",
          "float32", "float64", "complex64", "complex128"]


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("complex"):
        return (rng.normal(size=shape) + 1j * rng.normal(size=shape)).astype(dtype)
    if dtype in ("bfloat16", "float16", "float32", "float64"):
        return rng.normal(size=shape).astype(np.float32)  # (bf16 from float32 values)
    return rng.integers(-100 if dtype != "uint8" else 0, 100, size=shape).astype(dtype)


def _kiln_tensor(dtype, shape, seed=0):
    return kiln.tensor(_values(dtype, shape, seed), dtype=getattr(kiln, dtype))


def _np(t):
    """A kiln or torch tensor's values as numpy (bfloat16 widened to float32)."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        return (t.float() if t.dtype == torch.bfloat16 else t).numpy()
    return (t.float() if t.dtype == kiln.bfloat16 else t).detach().numpy()


def _same(k, t):
    assert str(k.dtype).split(".")[-1] == str(t.dtype).split(".")[-1]
    assert tuple(k.shape) == tuple(t.shape)
    assert k.requires_grad == t.requires_grad
    np.testing.assert_array_equal(_np(k), _np(t))


def _assert_tree(k, t):
    """kiln's object k against torch's t: same containers (and key order), same values."""
    if isinstance(t, torch.Tensor):
        assert isinstance(k, kiln.Tensor)
        assert isinstance(k, kiln.nn.Parameter) == isinstance(t, torch.nn.Parameter)
        _same(k, t)
    elif isinstance(t, dict):
        assert type(k) is type(t)
        assert list(k) == list(t)
        for key in t:
            _assert_tree(k[key], t[key])
    elif isinstance(t, torch.dtype):
        assert k == getattr(kiln, str(t).split(".")[-1])
    elif isinstance(t, torch.device):
        assert str(k) == str(t)
    elif isinstance(t, torch.Size):
        assert type(k) is kiln.Size and tuple(k) == tuple(t)
    elif isinstance(t, (list, tuple)):
        assert type(k) is type(t) and len(k) == len(t)
        for a, b in zip(k, t):
            _assert_tree(a, b)
    else:
        assert type(k) is type(t) and k == t


def _mixed():
    w = _kiln_tensor("float32", (3, 4))
    return collections.OrderedDict([
        ("z_first", w), ("a_view", w[1:, 2:]), ("t", w.t()),
        ("param", kiln.nn.Parameter(_kiln_tensor("float32", (2,), 1))),
        ("frozen", kiln.nn.Parameter(_kiln_tensor("float64", (2, 2), 2), requires_grad=False)),
        ("grad", _kiln_tensor("float32", (2,), 3).requires_grad_(True)),
        ("nested", {"list": [1, -2.5, None, "s", True, (1, (2, 3))], "empty": {},
                    "tensors": [_kiln_tensor("int64", (0, 3)), _kiln_tensor("bool", ())]}),
        ("scalars", (2 ** 70, -7, 1e300, float("inf"), 1 + 2j, b"raw", bytearray(b"ba"))),
        ("sets", [{1, 2}, collections.Counter("aab")]),
        ("meta", [kiln.float16, kiln.device("cpu"), kiln.Size([2, 3])]),
    ])


def _roundtrip_kiln(obj, **load_kwargs):
    buf = io.BytesIO()
    kiln.save(obj, buf)
    buf.seek(0)
    return kiln.load(buf, **load_kwargs)


# --- kiln -> kiln ------------------------------------------------------------------------

def test_kiln_round_trip_keeps_structure_and_order():
    obj = _mixed()
    back = _roundtrip_kiln(obj)
    assert type(back) is collections.OrderedDict and list(back) == list(obj)
    for k in ("z_first", "a_view", "t", "grad"):
        assert type(back[k]) is kiln.Tensor
        np.testing.assert_array_equal(back[k].detach().numpy(), obj[k].detach().numpy())
    assert back["grad"].requires_grad and back["grad"].is_leaf
    assert type(back["param"]) is kiln.nn.Parameter and back["param"].requires_grad
    assert type(back["frozen"]) is kiln.nn.Parameter and not back["frozen"].requires_grad
    n = back["nested"]
    assert n["list"] == [1, -2.5, None, "s", True, (1, (2, 3))] and n["empty"] == {}
    assert n["tensors"][0].shape == (0, 3) and n["tensors"][1].dtype == kiln.bool
    assert back["scalars"] == obj["scalars"] and type(back["scalars"][6]) is bytearray
    assert back["sets"] == obj["sets"] and type(back["sets"][1]) is collections.Counter
    assert back["meta"] == [kiln.float16, kiln.device("cpu"), kiln.Size([2, 3])]
    assert type(back["meta"][2]) is kiln.Size


def test_kiln_round_trip_shares_storage_and_identity():
    w = kiln.arange(12.0).reshape(3, 4)
    shared = [1, 2]
    back = _roundtrip_kiln({"w": w, "v": w[1:, 1:3], "again": w, "l1": shared, "l2": shared})
    assert back["again"] is back["w"] and back["l1"] is back["l2"]
    with kiln.no_grad():
        back["w"].add_(100)  # the view sees it: one storage, as in torch
    assert back["v"].tolist() == [[105.0, 106.0], [109.0, 110.0]]


def test_every_dtype_round_trips_in_kiln():
    obj = {d: _kiln_tensor(d, (2, 3), i) for i, d in enumerate(DTYPES)}
    back = _roundtrip_kiln(obj)
    for d, t in obj.items():
        assert back[d].dtype == t.dtype
        np.testing.assert_array_equal(_np(back[d]), _np(t))


# --- kiln -> torch -----------------------------------------------------------------------

@pytest.mark.parametrize("weights_only", [True, False])
def test_torch_loads_kiln_files(tmp_path, weights_only):
    obj = _mixed()
    path = tmp_path / "mixed.pt"
    kiln.save(obj, path)
    t = torch.load(path, weights_only=weights_only)
    assert list(t) == list(obj)
    _assert_tree(obj["z_first"], t["z_first"])
    _assert_tree(obj["param"], t["param"])
    _assert_tree(obj["frozen"], t["frozen"])
    _assert_tree(obj["grad"].detach().requires_grad_(True), t["grad"])
    assert t["nested"]["list"] == [1, -2.5, None, "s", True, (1, (2, 3))]
    assert t["nested"]["tensors"][0].shape == (0, 3)
    assert t["scalars"] == obj["scalars"]
    assert t["sets"] == obj["sets"]
    assert t["meta"] == [torch.float16, torch.device("cpu"), torch.Size([2, 3])]
    # views share one storage in torch too
    assert t["a_view"].untyped_storage().data_ptr() == t["z_first"].untyped_storage().data_ptr()
    assert t["t"].untyped_storage().data_ptr() == t["z_first"].untyped_storage().data_ptr()
    assert t["a_view"].storage_offset() == 6 and t["t"].stride() == (1, 4)
    np.testing.assert_array_equal(t["a_view"].numpy(), obj["a_view"].numpy())
    # and the file is torch's layout: the records torch writes, data 64-byte aligned
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        assert names[:4] == ["mixed/data.pkl", "mixed/.format_version",
                             "mixed/.storage_alignment", "mixed/byteorder"]
        assert names[-2:] == ["mixed/version", "mixed/.data/serialization_id"]
        n_storages = sum(n.startswith("mixed/data/") for n in names)
        assert n_storages == 6  # w and its two views: one storage
        raw = path.read_bytes()
        for info in z.infolist():
            name_len, extra_len = struct.unpack("<HH", raw[info.header_offset + 26:
                                                           info.header_offset + 30])
            assert (info.header_offset + 30 + name_len + extra_len) % 64 == 0
    torch.load(path, mmap=True, weights_only=True)  # (mmap needs the alignment)


def test_every_dtype_kiln_to_torch_and_back(tmp_path):
    obj = {d: _kiln_tensor(d, (2, 3), i) for i, d in enumerate(DTYPES)}
    obj.update({f"{d}.t": obj[d].t() for d in DTYPES})
    kiln.save(obj, tmp_path / "d.pt")
    t = torch.load(tmp_path / "d.pt")
    for k in obj:
        _same(obj[k], t[k])
    torch.save(t, tmp_path / "back.pt")
    back = kiln.load(tmp_path / "back.pt")
    for k in obj:
        _same(back[k], t[k])


def test_pickle_is_byte_identical_to_torchs():
    # the same state_dict saved by both: the same data.pkl (torch's globals, memo, opcodes)
    tm = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    sd = tm.state_dict()
    ksd = kiln.load(_bytes_io(lambda b: torch.save(sd, b)))
    tb, kb = io.BytesIO(), io.BytesIO()
    torch.save(sd, tb)
    kiln.save(ksd, kb)
    with zipfile.ZipFile(tb) as zt, zipfile.ZipFile(kb) as zk:
        assert zk.read("archive/data.pkl") == zt.read("archive/data.pkl")
        assert [n for n in zk.namelist()] == [n for n in zt.namelist()]
        for n in zt.namelist():
            if "/data/" in n:
                assert zk.read(n) == zt.read(n)
        pkl = zk.read("archive/data.pkl")
    globals_ = {a for op, a, _ in pickletools.genops(pkl) if op.name == "GLOBAL"}
    assert globals_ == {"collections OrderedDict", "torch._utils _rebuild_tensor_v2",
                        "torch FloatStorage", "torch LongStorage"}


def test_kiln_module_state_dict_drives_torch_module(tmp_path):
    def make(nn):
        return nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.Flatten(),
                             nn.Linear(12, 2))
    km = make(kiln.nn)
    km.train()
    km(kiln.randn(4, 2, 4, 4))  # running stats and num_batches_tracked move
    kiln.save(km.state_dict(), tmp_path / "m.pt")
    tm = make(torch.nn)
    tm.load_state_dict(torch.load(tmp_path / "m.pt"))
    assert int(tm[1].num_batches_tracked) == 1
    km.eval()
    tm.eval()
    x = np.random.default_rng(0).normal(size=(2, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(km(kiln.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


# --- torch -> kiln -----------------------------------------------------------------------

def _bytes_io(save):
    b = io.BytesIO()
    save(b)
    b.seek(0)
    return b


def test_torch_module_state_dicts_load_in_kiln(tmp_path):
    torch.manual_seed(0)
    tm = torch.nn.Sequential(torch.nn.Conv2d(2, 3, 3), torch.nn.BatchNorm2d(3),
                             torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(12, 2))
    tm.train()
    tm(torch.randn(4, 2, 4, 4))
    tm(torch.randn(4, 2, 4, 4))
    torch.save(tm.state_dict(), tmp_path / "t.pth")
    sd = kiln.load(tmp_path / "t.pth")
    _assert_tree(sd, tm.state_dict())
    assert sd["1.num_batches_tracked"].dtype == kiln.int64
    assert sd["1.num_batches_tracked"].shape == () and int(sd["1.num_batches_tracked"]) == 2
    assert sd._metadata == tm.state_dict()._metadata  # (torch's BUILD on the OrderedDict)
    km = kiln.nn.Sequential(kiln.nn.Conv2d(2, 3, 3), kiln.nn.BatchNorm2d(3), kiln.nn.ReLU(),
                            kiln.nn.Flatten(), kiln.nn.Linear(12, 2))
    km.load_state_dict(sd)
    km.eval()
    tm.eval()
    x = np.random.default_rng(1).normal(size=(2, 2, 4, 4)).astype(np.float32)
    np.testing.assert_allclose(km(kiln.tensor(x)).detach().numpy(),
                               tm(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_torch_optimizer_state_dict_loads_in_kiln():
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2)
    opt = torch.optim.Adam(lin.parameters(), lr=0.01, betas=(0.8, 0.9))
    lin(torch.randn(5, 3)).sum().backward()
    opt.step()
    state = {"model": lin.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
             "best": 0.25, "note": "adam", "steps": [1, 2]}
    k = kiln.load(_bytes_io(lambda b: torch.save(state, b)))
    _assert_tree(k, state)
    assert list(k["optimizer"]["state"]) == [0, 1]  # int keys
    assert k["optimizer"]["param_groups"][0]["betas"] == (0.8, 0.9)
    assert k["optimizer"]["param_groups"][0]["params"] == [0, 1]


def test_torch_views_and_parameters_load_shared_in_kiln():
    base = torch.arange(24.0).reshape(4, 6)
    p = torch.nn.Parameter(torch.ones(3))
    obj = [base, base[1:3, ::2], base.t(), base[2], p, p, {"p": p}]
    k = kiln.load(_bytes_io(lambda b: torch.save(obj, b)))
    _assert_tree(k, obj)
    assert k[4] is k[5] and k[6]["p"] is k[4]
    assert k[1].stride() == (6, 2) and k[1].storage_offset() == 6
    with kiln.no_grad():
        k[0].mul_(-1)  # one storage: every view sees it
    np.testing.assert_array_equal(k[1].numpy(), -obj[1].numpy())
    np.testing.assert_array_equal(k[2].numpy(), -obj[2].numpy())
    np.testing.assert_array_equal(k[3].numpy(), -obj[3].numpy())


def test_tensor_attributes_travel_on_parameters():
    p = kiln.nn.Parameter(kiln.ones(2))
    p.tag = "emb"
    b = io.BytesIO()
    kiln.save({"p": p}, b)
    b.seek(0)
    assert torch.load(b)["p"].tag == "emb"
    b.seek(0)
    assert kiln.load(b)["p"].tag == "emb"
    t = torch.ones(2)
    t.tag = "x"  # plain tensors carry attributes both ways, as torch's
    k = kiln.load(_bytes_io(lambda b: torch.save([t], b)))
    assert k[0].tolist() == [1.0, 1.0] and k[0].tag == "x" and type(k[0]) is kiln.Tensor
    u = kiln.arange(3.0)
    u.tag, u.info = "y", {"n": 3}
    b = io.BytesIO()
    kiln.save([u], b)
    b.seek(0)
    back = torch.load(b)[0]
    assert back.tolist() == [0.0, 1.0, 2.0] and back.tag == "y" and back.info == {"n": 3}
    b.seek(0)
    again = kiln.load(b)[0]
    assert again.tag == "y" and again.info == {"n": 3}


def test_torch_every_dtype_and_odd_values_load_in_kiln():
    obj = {d: torch.tensor(_values(d, (3, 2), i), dtype=getattr(torch, d))
           for i, d in enumerate(DTYPES)}
    obj["scalar"] = torch.tensor(2.5)
    obj["empty"] = torch.zeros(0, 4, dtype=torch.int16)
    obj["grad"] = torch.ones(2, requires_grad=True)
    obj["misc"] = (torch.float64, torch.device("cpu"), torch.Size([1, 2]), 1 + 1j, b"\x00\xff",
                   {3}, None)
    k = kiln.load(_bytes_io(lambda b: torch.save(obj, b)))
    _assert_tree(k, obj)


def test_torch_legacy_format_loads_in_kiln():
    base = torch.arange(6.0)
    obj = {"a": base, "v": base[2:], "i": torch.tensor([1, 2], dtype=torch.int16),
           "p": torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16)), "n": [1, "x"]}
    b = _bytes_io(lambda b: torch.save(obj, b, _use_new_zipfile_serialization=False))
    k = kiln.load(b)
    _assert_tree(k, obj)
    with kiln.no_grad():
        k["a"].add_(1)
    assert k["v"].tolist() == [3.0, 4.0, 5.0, 6.0]
    b.seek(0)
    assert kiln.load(b, map_location="cpu")["i"].tolist() == [1, 2]


# --- map_location ------------------------------------------------------------------------

def test_map_location_forms(tmp_path):
    # a file whose storages were saved on kiln's 'testing' device (location 'testing:0')
    obj = {"w": kiln.arange(6.0).to("testing"), "c": kiln.ones(2)}
    path = tmp_path / "dev.pt"
    kiln.save(obj, path)
    assert kiln.load(path)["w"].device == kiln.device("testing:0")
    assert kiln.load(path)["c"].device == kiln.device("cpu")
    for ml in ("cpu", kiln.device("cpu"), {"testing:0": "cpu"}, lambda s, loc: s):
        r = kiln.load(path, map_location=ml)
        assert r["w"].device == kiln.device("cpu"), ml
        assert r["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    seen = []
    r = kiln.load(path, map_location=lambda s, loc: seen.append((loc, tuple(s.shape))))
    assert sorted(seen) == [("cpu", (2,)), ("testing:0", (6,))]
    assert r["w"].device == kiln.device("testing:0")  # None: the saved location
    assert kiln.load(path, map_location="testing")["c"].device == kiln.device("testing:0")
    assert kiln.load(path, map_location={"cpu": "testing"})["c"].device.type == "testing"
    # torch reads the file when told where to put the storages
    t = torch.load(path, map_location="cpu")
    assert t["w"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    with pytest.raises(RuntimeError):
        torch.load(path)
    # errors: a location kiln lacks, a bad map_location, the function's own error
    tbuf = _bytes_io(lambda b: torch.save({"x": torch.ones(1)}, b))
    with zipfile.ZipFile(tbuf) as z:
        pkl = z.read("archive/data.pkl").replace(b"X\x03\x00\x00\x00cpu",
                                                 b"X\x03\x00\x00\x00abc")
        data = _zip_with_pickle(pkl, [("archive/data/0", z.read("archive/data/0"))]).getvalue()
    with pytest.raises(RuntimeError, match="on 'abc'.*map_location='cpu'"):
        kiln.load(io.BytesIO(data))
    assert kiln.load(io.BytesIO(data), map_location="cpu")["x"].tolist() == [1.0]
    with pytest.raises(TypeError, match="map_location"):
        kiln.load(path, map_location=3)

    def boom(storage, location):
        raise KeyError("from the caller")
    with pytest.raises(KeyError, match="from the caller"):
        kiln.load(path, map_location=boom)


def test_map_location_on_safetensors_files(tmp_path):
    path = tmp_path / "s.safetensors"
    kiln.save({"a": kiln.ones(2)}, path)
    assert kiln.load(path, map_location={"cpu": "testing"})["a"].device.type == "testing"
    assert kiln.load(path, map_location=lambda s, loc: s * 2)["a"].tolist() == [2.0, 2.0]
    assert kiln.load(path, map_location="testing")["a"].device.type == "testing"


# --- format choice -----------------------------------------------------------------------

def test_format_follows_the_target(tmp_path):
    state = {"w": kiln.arange(4.0)}
    kiln.save(state, tmp_path / "a.safetensors")
    assert safetensors.torch.load_file(str(tmp_path / "a.safetensors"))["w"].tolist() == \
        [0.0, 1.0, 2.0, 3.0]
    kiln.save(state, tmp_path / "a.pt")
    kiln.save(state, str(tmp_path / "a.bin"))
    assert zipfile.is_zipfile(tmp_path / "a.pt") and zipfile.is_zipfile(tmp_path / "a.bin")
    buf = io.BytesIO()
    kiln.save(state, buf)
    assert buf.getvalue()[:4] == b"PK\x03\x04"
    buf = io.BytesIO()
    kiln.save(state, buf, metadata={"format": "pt"})  # metadata: safetensors
    assert safetensors.torch.load(buf.getvalue())["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    with open(tmp_path / "f.safetensors", "wb") as f:  # an open file: by its name
        kiln.save(state, f)
    assert safetensors.torch.load_file(str(tmp_path / "f.safetensors"))["w"].shape == (4,)
    for name in ("a.safetensors", "a.pt", "a.bin", "f.safetensors"):
        assert kiln.load(tmp_path / name)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
        with open(tmp_path / name, "rb") as f:
            assert kiln.load(f)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_save_refuses_what_torch_load_would_not_read(tmp_path):
    path = tmp_path / "x.pt"
    path.write_bytes(b"untouched")
    for bad in ({"f": lambda: 0}, {"o": object()}, [np.zeros(2)], frozenset([1]),
                collections.namedtuple("P", "a")(1)):
        with pytest.raises(TypeError, match="cannot save"):
            kiln.save(bad, path)
    assert path.read_bytes() == b"untouched"
    # numpy scalars are written as Python numbers
    kiln.save({"acc": np.float32(0.5), "n": np.int64(3)}, path)
    assert torch.load(path) == {"acc": 0.5, "n": 3}


# --- refusing code -----------------------------------------------------------------------

def _zip_with_pickle(pkl, records=()):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pkl)
        for name, data in records:
            z.writestr(name, data)
        z.writestr("archive/version", "3\n")
    buf.seek(0)
    return buf


Cfg = collections.namedtuple("Cfg", "lr")


class _Evil:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return os.system, (f"touch {self.path}",)


def test_globals_outside_the_weights_only_set_are_refused(tmp_path):
    marker = tmp_path / "pwned"
    pkl = pickle.dumps({"x": _Evil(marker)}, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match="'posix.system'|'os.system'"):
        kiln.load(_zip_with_pickle(pkl))
    assert not marker.exists()
    # the same through torch.save (and its legacy format)
    for kw in ({}, {"_use_new_zipfile_serialization": False}):
        b = _bytes_io(lambda b: torch.save({"x": _Evil(marker)}, b, **kw))
        with pytest.raises(pickle.UnpicklingError, match="system"):
            kiln.load(b, weights_only=False)  # kiln is always weights-only
    assert not marker.exists()
    # a class torch users save: named in the message
    b = _bytes_io(lambda b: torch.save({"cfg": Cfg(0.1)}, b))
    with pytest.raises(pickle.UnpicklingError, match=r"'test_torch_format\.Cfg'"):
        kiln.load(b)
    for module, name in (("builtins", "eval"), ("torch._utils", "_rebuild_qtensor"),
                         ("torch", "load")):
        pkl = f"\x80\x02c{module}\n{name}\n)R.".encode("latin1")
        with pytest.raises(pickle.UnpicklingError, match=rf"'{module}\.{name}'"):
            kiln.load(_zip_with_pickle(pkl))
    # opcodes that build arbitrary objects
    with pytest.raises(pickle.UnpicklingError, match="INST"):
        kiln.load(_zip_with_pickle(b"(ios\nsystem\nX\x02\x00\x00\x00ls."))
    # BUILD cannot reach kiln's own functions
    pkl = b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\nN}X\x0c\x00\x00\x00__defaults__)s\x86b."
    with pytest.raises(RuntimeError, match="refusing to set"):
        kiln.load(_zip_with_pickle(pkl))


def test_bad_archives_give_clear_errors():
    with pytest.raises(RuntimeError, match="without data.pkl"):
        b = io.BytesIO()
        with zipfile.ZipFile(b, "w") as z:
            z.writestr("x.txt", "hi")
        b.seek(0)
        kiln.load(b)
    # a tensor pointing past its storage
    pkl = (b"\x80\x02ctorch._utils\n_rebuild_tensor_v2\n((X\x07\x00\x00\x00storagectorch\n"
           b"FloatStorage\nX\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x02tQK\x00K\x05\x85K\x01"
           b"\x85\x89NtR.")
    with pytest.raises(RuntimeError, match="outside its storage of 2 elements"):
        kiln.load(_zip_with_pickle(pkl, [("archive/data/0", b"\x00" * 8)]))
    with pytest.raises(RuntimeError, match="storage 0 has 4 bytes"):
        kiln.load(_zip_with_pickle(pkl, [("archive/data/0", b"\x00" * 4)]))


# --- fuzz --------------------------------------------------------------------------------

def _check_damaged(data):
    try:
        kiln.load(io.BytesIO(data))
    except (RuntimeError, ValueError, pickle.UnpicklingError):
        pass  # the clear errors; anything else (or a crash) fails the test


@pytest.mark.parametrize("fmt", ["zip", "legacy"])
def test_fuzz_truncated_and_flipped_files(fmt):
    obj = {"w": torch.arange(6.0).reshape(2, 3), "v": None, "l": [1, "a", (2.5,)],
           "p": torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16))}
    if fmt == "zip":
        kb = io.BytesIO()
        kiln.save(kiln.load(_bytes_io(lambda b: torch.save(obj, b))), kb)
        data = kb.getvalue()
    else:
        data = _bytes_io(lambda b: torch.save(obj, b, _use_new_zipfile_serialization=False))
        data = data.getvalue()
    kiln.load(io.BytesIO(data))  # intact: loads
    rng = random.Random(1234)
    start = time.perf_counter()
    cuts = sorted(set(list(range(0, 80)) + [rng.randrange(len(data)) for _ in range(80)]))
    for n in cuts:
        _check_damaged(data[:n])
    for _ in range(300):
        b = bytearray(data)
        for _ in range(rng.choice([1, 1, 2, 4])):
            b[rng.randrange(len(b))] = rng.randrange(256)
        _check_damaged(bytes(b))
    assert time.perf_counter() - start < 10  # no hang


def test_fuzz_the_pickle_inside_a_valid_archive():
    # (byte flips above mostly hit the zip's CRC checks: here the archive is rebuilt around
    # a damaged data.pkl, so the restricted unpickler itself meets the damage)
    obj = {"w": torch.arange(6.0).reshape(2, 3), "s": torch.arange(6.0)[2:], "n": None,
           "l": [1, "a", (2.5,)], "p": torch.nn.Parameter(torch.ones(2, dtype=torch.bfloat16))}
    with zipfile.ZipFile(_bytes_io(lambda b: torch.save(obj, b))) as z:
        records = [(n, z.read(n)) for n in z.namelist()]
    pkl = dict(records)["archive/data.pkl"]
    rng = random.Random(99)
    start = time.perf_counter()
    for i in range(400):
        p = bytearray(pkl)
        if i % 4 == 0:
            p = p[:rng.randrange(len(p))]
        else:
            for _ in range(rng.choice([1, 1, 2, 3])):
                p[rng.randrange(len(p))] = rng.randrange(256)
        storages = [(n, d) for n, d in records if "/data/" in n]
        _check_damaged(_zip_with_pickle(bytes(p), storages).getvalue())
    assert time.perf_counter() - start < 10
