"""Named tuples returned by ops with two results (as torch.return_types)."""
from collections import namedtuple

max = namedtuple("max", ["values", "indices"])
min = namedtuple("min", ["values", "indices"])
sort = namedtuple("sort", ["values", "indices"])
topk = namedtuple("topk", ["values", "indices"])
aminmax = namedtuple("aminmax", ["min", "max"])
median = namedtuple("median", ["values", "indices"])
nanmedian = namedtuple("nanmedian", ["values", "indices"])
kthvalue = namedtuple("kthvalue", ["values", "indices"])
cummax = namedtuple("cummax", ["values", "indices"])
cummin = namedtuple("cummin", ["values", "indices"])
