"""BlockMask, create_mask / create_block_mask and the mask_mod combinators of
kiln.nn.attention.flex_attention (torch.nn.attention.flex_attention's API).

A mask_mod(b, h, q_idx, kv_idx) is called ONCE with broadcast index tensors
b [B,1,1,1], h [1,H,1,1], q_idx [1,1,Q,1], kv_idx [1,1,1,KV] (torch vmaps it over scalars),
so elementwise mask_mods work unchanged; ones with data-dependent Python control flow
(``if q_idx > 3:``) do not.

Besides torch's block metadata (kv_num_blocks / kv_indices / full_kv_* and the transposed
q_* pairs, same shapes, dtypes and ordering as torch), a BlockMask made by create_block_mask
keeps the element-level mask it was built from: kiln's flex_attention is eager and
materialises the scores anyway, so it masks with that instead of re-running mask_mod.
"""
import functools
import inspect
import itertools
import operator

from ... import _C

_DEFAULT_SPARSE_BLOCK_SIZE = 128
_LARGE_SPARSE_BLOCK_SIZE = 1 << 30  # "one block covers everything": the no-mask BlockMask


def noop_mask(batch, head, token_q, token_kv):
    """A mask_mod that keeps everything."""
    return batch.new_ones((), dtype=_C.bool)


def _sliced_mask_mod_error(batch, head, token_q, token_kv):
    raise RuntimeError("Cannot use mask_mod from a sliced BlockMask. When you slice a "
                       "BlockMask using [], the mask_mod attribute is reset. You must set it "
                       "from the original BlockMask's mask_mod.")


def or_masks(*mask_mods):
    """The union of mask_mods."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def or_mask(b, h, q_idx, kv_idx):
        out = b.new_zeros((), dtype=_C.bool)
        for m in mask_mods:
            out = out | m(b, h, q_idx, kv_idx)
        return out
    return or_mask


def and_masks(*mask_mods):
    """The intersection of mask_mods."""
    if not all(callable(m) for m in mask_mods):
        raise RuntimeError(f"All inputs should be callable mask_mods: {mask_mods}")

    def and_mask(b, h, q_idx, kv_idx):
        out = b.new_ones((), dtype=_C.bool)
        for m in mask_mods:
            out = out & m(b, h, q_idx, kv_idx)
        return out
    return and_mask


def _num_positional(fn):
    """Positional parameters without defaults: 4 = mask_mod, 5 = score_mod (torch's rule)."""
    n = sum(1 for p in inspect.signature(fn).parameters.values()
            if p.default is inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    if n not in (4, 5):
        raise AssertionError(f"Expected 4 or 5 positional args, got {n}")
    return n


def _index_grids(B, H, Q, KV, device):
    """The broadcast b, h, q_idx, kv_idx index tensors (int64, as torch's aranges)."""
    return (_C.arange(B, device=device).view(B, 1, 1, 1),
            _C.arange(H, device=device).view(1, H, 1, 1),
            _C.arange(Q, device=device).view(1, 1, Q, 1),
            _C.arange(KV, device=device).view(1, 1, 1, KV))


def _as_bool_grid(m, shape, device):
    if not isinstance(m, _C.Tensor):  # a mask_mod may return a Python bool
        m = _C.full((), bool(m), dtype=_C.bool, device=device)
    if m.dtype != _C.bool:
        m = m != 0
    return m.expand(*shape)


def create_mask(mod_fn, B, H, Q_LEN, KV_LEN, device=None):
    """The bool mask [B, H, Q_LEN, KV_LEN] of a mask_mod, or of a score_mod (True where it
    does not give -inf). B / H of None mean 1."""
    device = "cpu" if device is None else device
    B, H = B or 1, H or 1
    b, h, q, kv = _index_grids(B, H, Q_LEN, KV_LEN, device)
    shape = (B, H, Q_LEN, KV_LEN)
    if _num_positional(mod_fn) == 5:
        out = mod_fn(_C.zeros(*shape, device=device), b, h, q, kv)
        return (out != float("-inf")).expand(*shape).contiguous()
    return _as_bool_grid(mod_fn(b, h, q, kv), shape, device).contiguous()


# --- the ordered (BCSR-like) block format ---------------------------------------------------

def _dense_to_ordered(dense):
    """[..., R, C] 0/1 block grid -> (blocks per row, their column indices first, ascending,
    then the absent columns, ascending), both int32, as torch."""
    dense = dense.to(_C.int32)
    num = dense.sum(-1).to(_C.int32)
    idx = _C.argsort(dense, dim=-1, descending=True, stable=True).to(_C.int32)
    return num, idx


def _ordered_to_dense(num, idx, num_cols):
    """The inverse: an int32 [..., R, num_cols] grid with 1 at the listed blocks."""
    m = idx.shape[-1]
    listed = _C.arange(m, device=idx.device) < num.to(_C.int64).unsqueeze(-1)
    # Unlisted entries write into a spare column that is cut off afterwards.
    cols = _C.where(listed, idx.to(_C.int64), num_cols)
    grid = _C.zeros(*idx.shape[:-1], num_cols + 1, dtype=_C.int32, device=idx.device)
    grid = grid.scatter(-1, cols, _C.ones(*cols.shape, dtype=_C.int32, device=idx.device))
    return grid[..., :num_cols].contiguous()


def _transpose_ordered(num, idx):
    dense = _ordered_to_dense(num, idx, idx.shape[-1])
    return _dense_to_ordered(dense.transpose(-2, -1))


def _cdiv(a, b):
    return (a + b - 1) // b


class BlockMask:
    """A block-sparse attention mask in torch's format: for each [Q_BLOCK, KV_BLOCK] tile row,
    kv_num_blocks / kv_indices list the partially masked tiles and full_kv_num_blocks /
    full_kv_indices the unmasked ones (tiles in neither are skipped); q_* are the same
    lists per column. BLOCK_SIZE is (Q_BLOCK_SIZE, KV_BLOCK_SIZE)."""

    def __init__(self, seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                 full_kv_indices, q_num_blocks, q_indices, full_q_num_blocks, full_q_indices,
                 BLOCK_SIZE=(_DEFAULT_SPARSE_BLOCK_SIZE, _DEFAULT_SPARSE_BLOCK_SIZE),
                 mask_mod=noop_mask):
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both "
                                 "provided or omitted")
        if (full_q_num_blocks is None) != (full_q_indices is None):
            raise AssertionError("full_q_num_blocks and full_q_indices must be both "
                                 "provided or omitted")
        self.seq_lengths = tuple(seq_lengths)
        self.kv_num_blocks, self.kv_indices = kv_num_blocks, kv_indices
        self.full_kv_num_blocks, self.full_kv_indices = full_kv_num_blocks, full_kv_indices
        self.q_num_blocks, self.q_indices = q_num_blocks, q_indices
        self.full_q_num_blocks, self.full_q_indices = full_q_num_blocks, full_q_indices
        self.BLOCK_SIZE = tuple(BLOCK_SIZE)
        self.mask_mod = mask_mod
        self._mask = None  # element-level bool mask, when known (create_block_mask)

    @classmethod
    def from_kv_blocks(cls, kv_num_blocks, kv_indices, full_kv_num_blocks=None,
                       full_kv_indices=None, BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE,
                       mask_mod=None, seq_lengths=None, compute_q_blocks=True):
        """A BlockMask from its kv-side lists; the q-side ones are derived."""
        if kv_indices.dim() < 2:
            raise RuntimeError("BlockMask must have at least 2 dimensions")
        if (full_kv_num_blocks is None) != (full_kv_indices is None):
            raise AssertionError("full_kv_num_blocks and full_kv_indices must be both "
                                 "provided or omitted")
        q_num = q_idx = full_q_num = full_q_idx = None
        if compute_q_blocks:
            q_num, q_idx = _transpose_ordered(kv_num_blocks, kv_indices)
            if full_kv_num_blocks is not None:
                full_q_num, full_q_idx = _transpose_ordered(full_kv_num_blocks,
                                                            full_kv_indices)
        if isinstance(BLOCK_SIZE, int):
            BLOCK_SIZE = (BLOCK_SIZE, BLOCK_SIZE)
        if seq_lengths is None:
            seq_lengths = (kv_indices.shape[-2] * BLOCK_SIZE[0],
                           kv_indices.shape[-1] * BLOCK_SIZE[1])
        return cls(seq_lengths, kv_num_blocks, kv_indices, full_kv_num_blocks,
                   full_kv_indices, q_num, q_idx, full_q_num, full_q_idx, BLOCK_SIZE,
                   mask_mod if mask_mod is not None else noop_mask)

    def as_tuple(self, flatten=True):
        sizes = (*self.seq_lengths,) if flatten else (self.seq_lengths,)
        blocks = (*self.BLOCK_SIZE,) if flatten else (self.BLOCK_SIZE,)
        return (*sizes, self.kv_num_blocks, self.kv_indices, self.full_kv_num_blocks,
                self.full_kv_indices, self.q_num_blocks, self.q_indices,
                self.full_q_num_blocks, self.full_q_indices, *blocks, self.mask_mod)

    @property
    def shape(self):
        return tuple(self.kv_indices.shape[:-2]) + self.seq_lengths

    def numel(self):
        return functools.reduce(operator.mul, self.shape, 1)

    def sparsity(self):
        """Percentage of the [B, H, Q, KV] elements in tiles that are skipped (torch's
        definition: counts whole tiles, padding included)."""
        blocks = int(self.kv_num_blocks.sum().item())
        if self.full_kv_num_blocks is not None:
            blocks += int(self.full_kv_num_blocks.sum().item())
        computed = blocks * self.BLOCK_SIZE[0] * self.BLOCK_SIZE[1]
        return 100 * (1 - computed / self.numel())

    def to_dense(self):
        """The int32 tile grid [..., Q_BLOCKS, KV_BLOCKS]: 1 where a tile is computed."""
        dense = _ordered_to_dense(self.kv_num_blocks, self.kv_indices,
                                  self.kv_indices.shape[-1])
        if self.full_kv_num_blocks is not None:
            dense = dense | _ordered_to_dense(self.full_kv_num_blocks, self.full_kv_indices,
                                              self.full_kv_indices.shape[-1])
        return dense

    def to(self, device):
        def mv(t):
            return None if t is None else t.to(device)
        out = BlockMask(self.seq_lengths, *(mv(getattr(self, n)) for n in (
            "kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices",
            "q_num_blocks", "q_indices", "full_q_num_blocks", "full_q_indices")),
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=self.mask_mod)
        out._mask = mv(self._mask)
        return out

    def __getitem__(self, index):
        """Index the batch / head / q-tile dims (ints keep their dim, as torch). The result's
        mask_mod raises: torch does not carry a mask_mod across slicing either."""
        index = index if isinstance(index, tuple) else (index,)
        index = (*index, slice(None), slice(None), slice(None))[:3]
        sizes = self.kv_num_blocks.shape[:3]
        index = tuple(slice(i % n, i % n + 1) if isinstance(i, int) else i
                      for i, n in zip(index, sizes))
        full = self.full_kv_num_blocks is not None
        return BlockMask.from_kv_blocks(
            self.kv_num_blocks[index], self.kv_indices[index],
            self.full_kv_num_blocks[index] if full else None,
            self.full_kv_indices[index] if full else None,
            BLOCK_SIZE=self.BLOCK_SIZE, mask_mod=_sliced_mask_mod_error,
            seq_lengths=self.seq_lengths, compute_q_blocks=self.q_indices is not None)

    def _element_mask(self):
        """The bool mask flex_attention applies, broadcastable to [B, H, Q, KV]; None for
        the no-mask BlockMask."""
        if self._mask is not None:
            return self._mask
        if self.BLOCK_SIZE == (_LARGE_SPARSE_BLOCK_SIZE, _LARGE_SPARSE_BLOCK_SIZE):
            return None
        if self.mask_mod is _sliced_mask_mod_error:
            _sliced_mask_mod_error(None, None, None, None)
        # A hand-built BlockMask: skipped tiles are masked out, mask_mod applies elsewhere.
        q_len, kv_len = self.seq_lengths
        tiles = self.to_dense().to(_C.bool)
        tiles = tiles.repeat_interleave(self.BLOCK_SIZE[0], -2)
        tiles = tiles.repeat_interleave(self.BLOCK_SIZE[1], -1)[..., :q_len, :kv_len]
        while tiles.dim() < 4:
            tiles = tiles.unsqueeze(0)
        B, H = tiles.shape[0], tiles.shape[1]
        mod = create_mask(self.mask_mod, B, H, q_len, kv_len, tiles.device)
        return tiles & mod

    def __repr__(self):
        def shape_or_none(t):
            return None if t is None else t.shape
        mm = getattr(self.mask_mod, "__name__", self.mask_mod)
        return ("BlockMask(\n"
                f"    kv_num_blocks={self.kv_num_blocks.shape},\n"
                f"    kv_indices={self.kv_indices.shape},\n"
                f"    full_kv_num_blocks={shape_or_none(self.full_kv_num_blocks)},\n"
                f"    full_kv_indices={shape_or_none(self.full_kv_indices)},\n"
                f"    q_num_blocks={shape_or_none(self.q_num_blocks)},\n"
                f"    q_indices={shape_or_none(self.q_indices)},\n"
                f"    full_q_num_blocks={shape_or_none(self.full_q_num_blocks)},\n"
                f"    full_q_indices={shape_or_none(self.full_q_indices)},\n"
                f"    BLOCK_SIZE={self.BLOCK_SIZE},\n"
                f"    shape={self.shape},\n"
                f"    sparsity={self.sparsity():.2f}%,\n"
                f"    mask_mod={mm}\n)")

    def __str__(self):
        return (f"BlockMask(shape={self.shape}, sparsity={self.sparsity():.2f}%, \n"
                + self.to_string().strip() + "\n)")

    def to_string(self, grid_size=(20, 20), limit=4):
        """A text picture of the tile grid per (batch, head): █ computed, ░ mixed cell (when
        several tiles share a character), blank skipped."""
        dense = self.to_dense()
        *batch, rows, cols = dense.shape
        if grid_size == -1:
            max_r, max_c = rows, cols
        elif isinstance(grid_size, int):
            max_r = max_c = grid_size
        else:
            max_r, max_c = grid_size
        rs, cs = max(1, _cdiv(rows, max_r)), max(1, _cdiv(cols, max_c))
        grid = dense.tolist()
        parts = []
        for n, bi in enumerate(itertools.product(*(range(s) for s in batch))):
            if n == limit:
                parts += ["...", "To print out more, set BlockMask.to_string(limit=N)",
                          "You can also index (BlockMask[batch, head]) to choose a specific "
                          "batch or head"]
                break
            g = grid
            for i in bi:
                g = g[i]
            lines = [f"{bi}"]
            for r in range(0, rows, rs):
                line = ""
                for c in range(0, cols, cs):
                    cell = [v for row in g[r:r + rs] for v in row[c:c + cs]]
                    frac = sum(cell) / len(cell)
                    line += ("█" if frac == 1 else " " if frac == 0 else "░") * 2
                lines.append(line)
            parts.append("\n".join(lines) + "\n")
        return "\n".join(parts)


def _tiles(mask, q_block, kv_block):
    """Per [Q_BLOCK, KV_BLOCK] tile of a bool [B, H, Q, KV] mask (zero-padded to whole
    tiles, as torch): (partial tiles, full tiles) as 0/1 grids [B, H, Q_BLOCKS, KV_BLOCKS]."""
    B, H, Q, KV = mask.shape
    nq, nk = _cdiv(Q, q_block), _cdiv(KV, kv_block)
    counts = mask.to(_C.int32)
    if nq * q_block != Q or nk * kv_block != KV:
        counts = _C.pad(counts, (0, nk * kv_block - KV, 0, nq * q_block - Q))
    counts = counts.reshape(B, H, nq, q_block, nk, kv_block).sum(dim=[3, 5])
    full = counts == q_block * kv_block
    partial = (counts > 0) & _C.logical_not(full)
    return partial, full


def create_block_mask(mask_mod, B, H, Q_LEN, KV_LEN, device=None,
                      BLOCK_SIZE=_DEFAULT_SPARSE_BLOCK_SIZE, _compile=False,
                      separate_full_blocks=True):
    """The BlockMask of a mask_mod for [B, H, Q_LEN, KV_LEN] (B / H of None: broadcast, 1).
    _compile is accepted and ignored (kiln evaluates the mask_mod eagerly, once)."""
    if _num_positional(mask_mod) != 4:
        raise AssertionError(f"create-block_mask requires a mask_mod function! Got {mask_mod}")
    qb, kb = (BLOCK_SIZE, BLOCK_SIZE) if isinstance(BLOCK_SIZE, int) else tuple(BLOCK_SIZE)
    mask = create_mask(mask_mod, B, H, Q_LEN, KV_LEN, device)
    partial, full = _tiles(mask, qb, kb)
    if not separate_full_blocks:
        partial, full = partial | full, None
    num, idx = _dense_to_ordered(partial)
    fnum, fidx = _dense_to_ordered(full) if full is not None else (None, None)
    bm = BlockMask.from_kv_blocks(num, idx, fnum, fidx, BLOCK_SIZE=(qb, kb),
                                  mask_mod=mask_mod, seq_lengths=(Q_LEN, KV_LEN))
    bm._mask = mask
    return bm


def _create_empty_block_mask(query, key):
    """The BlockMask of 'no mask' (one tile covering everything), as torch's default."""
    dev = query.device
    return BlockMask.from_kv_blocks(
        kv_num_blocks=_C.ones(1, 1, 1, dtype=_C.int32, device=dev),
        kv_indices=_C.zeros(1, 1, 1, 1, dtype=_C.int32, device=dev),
        BLOCK_SIZE=_LARGE_SPARSE_BLOCK_SIZE, seq_lengths=(1, 1))
