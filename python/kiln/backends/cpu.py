"""kiln.backends.cpu: the instruction-set level kiln's CPU kernels were chosen for, as
torch.backends.cpu.get_cpu_capability. Levels, lowest first: "baseline" (x86-64), "avx2"
(AVX2 + FMA), "avx512", "avx512_vnni" (with VNNI and BF16), "amx". KILN_CPU_ISA caps it (set
before the first use of kiln; oneDNN gets the same cap)."""
from .. import _C

LEVELS = ("baseline", "avx2", "avx512", "avx512_vnni", "amx")


def get_cpu_capability():
    """The level in use: the detected one, capped by KILN_CPU_ISA."""
    return _C._cpu_isa_level()


def detected_isa_level():
    """The best level this CPU and OS support (CPUID checked against XGETBV)."""
    return _C._cpu_detected_isa_level()


def features():
    """The detected CPU features by name (e.g. "avx2", "avx512f", "amx_tile")."""
    return list(_C._cpu_features())


def model_name():
    return _C._cpu_model_name()
