"""Rendezvous: from init_process_group's init_method to a store, a rank and a world size.

  env://                 MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from the environment
  tcp://host:port        a TCPStore served by rank 0 at host:port
  file:///path/to/file   a FileStore (the file must be on a file system every rank sees)

rank and world_size come from the arguments, else from the URL's query (?rank=0&world_size=2),
else (env://) from the environment."""
import os
import urllib.parse

from .file_store import FileStore
from .tcp_store import TCPStore

__all__ = ["rendezvous"]


def _from_env(name, given):
    if given is not None and given != -1:
        return given
    value = os.environ.get(name)
    if value is None:
        raise ValueError("Error initializing torch.distributed using env:// rendezvous: "
                         f"environment variable {name} expected, but not set")
    return int(value)


def _from_query(query, name, given):
    if given is not None and given != -1:
        return given
    if name in query:
        return int(query[name][0])
    raise ValueError(f"Error initializing torch.distributed using the init_method's URL: "
                     f"{name} expected (as an argument or ?{name}= in the URL)")


def rendezvous(init_method, rank, world_size, timeout):
    """(store, rank, world_size)."""
    url = urllib.parse.urlparse(init_method)
    query = urllib.parse.parse_qs(url.query)
    if url.scheme == "env":
        rank = _from_env("RANK", rank)
        world_size = _from_env("WORLD_SIZE", world_size)
        addr = os.environ.get("MASTER_ADDR")
        port = os.environ.get("MASTER_PORT")
        for name, value in (("MASTER_ADDR", addr), ("MASTER_PORT", port)):
            if value is None:
                raise ValueError("Error initializing torch.distributed using env:// "
                                 f"rendezvous: environment variable {name} expected, but "
                                 "not set")
        store = TCPStore(addr, int(port), world_size, rank == 0, timeout)
    elif url.scheme == "tcp":
        rank = _from_query(query, "rank", rank)
        world_size = _from_query(query, "world_size", world_size)
        if url.hostname is None or url.port is None:
            raise ValueError(f"tcp:// rendezvous needs host and port: {init_method}")
        store = TCPStore(url.hostname, url.port, world_size, rank == 0, timeout)
    elif url.scheme == "file":
        rank = _from_query(query, "rank", rank)
        world_size = _from_query(query, "world_size", world_size)
        path = urllib.parse.unquote(url.netloc + url.path)
        store = FileStore(path, world_size)
        store.set_timeout(timeout)
    else:
        raise RuntimeError(f"No rendezvous handler for {url.scheme}://")
    return store, rank, world_size
