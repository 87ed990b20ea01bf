"""Backend (torch.distributed.Backend): the backend name as a lower-case str. kiln has one
backend, "gloo" (CPU tensors over TCP); "nccl" and "mpi" fail as they do in a torch build
without them."""

__all__ = ["Backend"]


class Backend(str):
    UNDEFINED = "undefined"
    GLOO = "gloo"
    NCCL = "nccl"
    UCC = "ucc"
    MPI = "mpi"
    XCCL = "xccl"

    def __new__(cls, name):
        if not isinstance(name, str):
            raise ValueError(f"Backend constructor parameter must be string-ish, but got: "
                             f"{type(name)}")
        value = name.lower()
        if value == "undefined":
            value = "gloo"
        if value in ("cpu:gloo", "gloo"):
            return super().__new__(cls, "gloo")
        if value in ("nccl", "cuda:nccl"):
            raise RuntimeError("Distributed package doesn't have NCCL built in")
        if value == "mpi":
            raise RuntimeError("Distributed package doesn't have MPI built in")
        if value in ("ucc", "xccl"):
            raise RuntimeError(f"Distributed package doesn't have {value.upper()} built in")
        raise AssertionError(f"Unknown backend type {name}")
