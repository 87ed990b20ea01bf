"""kiln.einsum (ops/einsum.h, also the ONNX importer's Einsum) against torch.einsum: explicit
and implicit outputs, ellipses that broadcast, diagonals, traces, batch and outer products,
three operands, the list form; values and gradients in float32 / float64."""
import pytest
import torch

import kiln
import oracle
from oracle import Op

FP = ["float32", "float64"]

CASES = [
    ("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]), ("bij,bjk", [(2, 3, 4), (2, 4, 5)]),
    ("ii", [(4, 4)]), ("ii->i", [(4, 4)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
    ("i,j->ij", [(3,), (4,)]), ("i,i->", [(5,), (5,)]), ("...ij,...jk->...ik",
                                                         [(2, 1, 3, 4), (5, 4, 2)]),
    ("...ij->...ji", [(2, 3, 4)]), ("bhqd,bhkd->bhqk", [(2, 3, 4, 5), (2, 3, 6, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]), ("iij->j", [(3, 3, 4)]),
    ("Ab,bC->AC", [(2, 3), (3, 4)]), (" i j , j k -> i k ", [(3, 4), (4, 2)]),
]

OPS = [Op(f"einsum[{eq.strip()}]", lambda L, *xs, _eq=eq: L.einsum(_eq, *xs),
          [tuple(shapes)], dtypes=FP) for eq, shapes in CASES]
OPS.append(Op("einsum_list", lambda L, a, b: L.einsum("ij,jk->ik", [a, b]),
              [((3, 4), (4, 5))], dtypes=FP))


@pytest.mark.parametrize("op,dtype", oracle.params(OPS))
def test_einsum_vs_torch(op, dtype):
    oracle.run_op(op, dtype)


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (5, 5)]),
                                       ("ij->k", [(3, 4)]), ("ij,jk->ik", [(3, 4)]),
                                       ("i-j->ij", [(3, 4)]), ("ijk->ij", [(3, 4)])])
def test_einsum_errors_like_torch(eq, shapes):
    with pytest.raises(Exception):
        torch.einsum(eq, *[torch.ones(s) for s in shapes])
    with pytest.raises(Exception) as e:
        kiln.einsum(eq, *[kiln.ones(s) for s in shapes])
    assert "einsum" in str(e.value) or "equation" in str(e.value), str(e.value)
    oracle.record("einsum_error")
