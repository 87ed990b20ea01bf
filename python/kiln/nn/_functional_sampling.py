"""kiln.nn.functional (continued): affine_grid and grid_sample as torch.nn.functional's,
composed of kiln's ops in Python (decision 0079). grid_sample turns every grid point into
source coordinates (unnormalised, then clipped or reflected by the padding mode), gathers the
neighbouring input values through flat indices and blends them with weights computed from the
coordinates, so autograd gives the gradients of both the input (gather's scatter_add) and the
grid (the weights); out-of-range neighbours count as zero."""
import itertools

from .. import _C

__all__ = ["affine_grid", "grid_sample"]

_CUBIC_A = -0.75  # the Keys cubic convolution's parameter, torch's for bicubic sampling


# --- affine_grid -------------------------------------------------------------------------

def _normalised_positions(steps, align_corners, like):
    """The steps sample positions along one axis in [-1, 1] (pixel centres unless
    align_corners, when the end pixels' centres sit on -1 and 1)."""
    if steps <= 1:
        return _C.zeros(max(steps, 0), dtype=like.dtype, device=like.device)
    positions = _C.linspace(-1.0, 1.0, steps, dtype=like.dtype, device=like.device)
    return positions if align_corners else positions * ((steps - 1) / steps)


def affine_grid(theta, size, align_corners=None):
    align_corners = bool(align_corners)
    if not theta.is_floating_point():
        raise ValueError(f"Expected theta to have floating point type, but got {theta.dtype}")
    size = [int(s) for s in size]
    if len(size) not in (4, 5):
        raise NotImplementedError(f"affine_grid only supports 4D and 5D sizes, for 2D and 3D "
                                  f"affine transforms, respectively. Got size {size}.")
    nd = len(size) - 2
    if theta.dim() != 3 or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise ValueError(f"Expected a batch of {nd}D affine matrices of shape Nx{nd}x{nd + 1} "
                         f"for size {size}. Got {list(theta.shape)}.")
    spatial = size[2:]
    if not (align_corners and min(spatial) == 1) and min(size) <= 0:
        raise ValueError(f"Expected non-zero, positive output size. Got {size}")
    if theta.shape[0] != size[0]:
        raise RuntimeError(f"Expected theta's batch size {theta.shape[0]} to match size[0] = "
                           f"{size[0]}")
    # base[..., :] = (x, y[, z], 1): x runs along the last spatial dim, y the one before, ...
    axes = []
    for d in reversed(range(nd)):
        shape = [1] * nd
        shape[d] = spatial[d]
        axes.append(_normalised_positions(spatial[d], align_corners, theta)
                    .reshape(shape).expand(spatial))
    axes.append(_C.ones(spatial, dtype=theta.dtype, device=theta.device))
    base = _C.stack(axes, -1).reshape(1, -1, nd + 1)
    grid = base.matmul(theta.transpose(1, 2))  # [N, points, nd]
    return grid.reshape([size[0]] + spatial + [nd])


# --- source coordinates ------------------------------------------------------------------

def _unnormalise(coord, size, align_corners):
    if align_corners:
        return (coord + 1) / 2 * (size - 1)
    return ((coord + 1) * size - 1) / 2


def _clip(coord, size):
    """coord clamped to [0, size - 1], with torch's gradient: zero on the borders too."""
    clamped = coord.clamp(0, size - 1)
    inside = (coord > 0) & (coord < size - 1)
    return _C.where(inside, coord, clamped.detach())


def _reflect(coord, twice_low, twice_high):
    """coord mirrored at low and high (given doubled, to stay integral) until inside."""
    if twice_low == twice_high:
        return _C.zeros_like(coord).detach()
    low, span = twice_low / 2, (twice_high - twice_low) / 2
    shifted = coord - low
    distance = _C.where(shifted < 0, -shifted, shifted)
    extra = distance.fmod(span)
    flips = (distance / span).floor().detach()
    even = flips.fmod(2) == 0
    return _C.where(even, extra + low, span - extra + low)


def _apply_padding(coord, size, padding_mode, align_corners):
    if padding_mode == "border":
        return _clip(coord, size)
    if padding_mode == "reflection":
        if align_corners:
            coord = _reflect(coord, 0, 2 * (size - 1))
        else:
            coord = _reflect(coord, -1, 2 * size - 1)
        return _clip(coord, size)
    return coord


# --- gathering ---------------------------------------------------------------------------

class _Gatherer:
    """Reads input values at integer source positions (one tensor per spatial dim, each
    [N, points]); positions outside the input read zero."""

    def __init__(self, input):
        self.n, self.c = input.shape[0], input.shape[1]
        self.sizes = list(input.shape[2:])
        self.flat = input.reshape(self.n, self.c, -1)

    def read(self, positions):
        flat_index, valid = None, None
        stride = 1
        for d in reversed(range(len(self.sizes))):
            p, size = positions[d], self.sizes[d]
            inside = (p >= 0) & (p < size)
            valid = inside if valid is None else valid & inside
            term = p.clamp(0, size - 1) * stride
            flat_index = term if flat_index is None else flat_index + term
            stride *= size
        points = flat_index.shape[1]
        values = self.flat.gather(2, flat_index.unsqueeze(1).expand(self.n, self.c, points))
        return values, valid.unsqueeze(1)


def _blend(gatherer, corners):
    """sum of weight * value over (positions, weight [N, points]) pairs, zero outside."""
    out = None
    for positions, weight in corners:
        values, valid = gatherer.read(positions)
        term = _C.where(valid, values * weight.unsqueeze(1), _C.zeros_like(values))
        out = term if out is None else out + term
    return out


def _linear(gatherer, coords):
    """(Bi/tri)linear: the 2^nd corners around each point, weights the opposite volumes."""
    lows = [c.floor().detach() for c in coords]
    corners = []
    for offsets in itertools.product((0, 1), repeat=len(coords)):
        positions, weight = [], None
        for c, low, off in zip(coords, lows, offsets):
            positions.append((low + off).to(_C.int64))
            w = c - low if off else (low + 1) - c
            weight = w if weight is None else weight * w
        corners.append((positions, weight))
    return _blend(gatherer, corners)


def _nearest(gatherer, coords):
    # round half to even, as torch's nearbyint; no gradient reaches the grid
    positions = [c.detach().round().to(_C.int64) for c in coords]
    values, valid = gatherer.read(positions)
    return _C.where(valid, values, _C.zeros_like(values))


def _cubic_weights(t):
    """The four Keys cubic weights of taps at distances 1 + t, t, 1 - t, 2 - t."""
    a = _CUBIC_A
    near = lambda x: ((a + 2) * x - (a + 3)) * x * x + 1  # noqa: E731  |x| <= 1
    far = lambda x: ((a * x - 5 * a) * x + 8 * a) * x - 4 * a  # noqa: E731  1 < |x| < 2
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _bicubic(gatherer, raw_coords, padding_mode, align_corners):
    """4 x 4 taps around each point; each tap's position is padded on its own (torch's)."""
    taps_per_dim, weights_per_dim = [], []
    for d, c in enumerate(raw_coords):
        low = c.floor().detach()
        weights_per_dim.append(_cubic_weights(c - low))
        size = gatherer.sizes[d]
        taps = [_apply_padding(low + (i - 1), size, padding_mode, align_corners).detach()
                for i in range(4)]
        # torch truncates a padded tap position towards zero
        taps_per_dim.append([t.trunc().to(_C.int64) for t in taps])
    corners = []
    for picks in itertools.product(range(4), repeat=len(raw_coords)):
        positions = [taps_per_dim[d][i] for d, i in enumerate(picks)]
        weight = None
        for d, i in enumerate(picks):
            w = weights_per_dim[d][i]
            weight = w if weight is None else weight * w
        corners.append((positions, weight))
    return _blend(gatherer, corners)


def _check_grid_sample(input, grid, mode, padding_mode):
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"nn.functional.grid_sample(): expected mode to be 'bilinear', "
                         f"'nearest' or 'bicubic', but got: '{mode}'")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"nn.functional.grid_sample(): expected padding_mode to be 'zeros', "
                         f"'border', or 'reflection', but got: '{padding_mode}'")
    if input.dim() not in (4, 5) or grid.dim() != input.dim():
        raise RuntimeError(f"grid_sampler(): expected 4D or 5D input and grid with same number "
                           f"of dimensions, but got input with sizes {list(input.shape)} and "
                           f"grid with sizes {list(grid.shape)}")
    nd = input.dim() - 2
    if grid.shape[-1] != nd:
        raise RuntimeError(f"grid_sampler(): expected grid to have size {nd} in last dimension,"
                           f" but got grid with sizes {list(grid.shape)}")
    if grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"grid_sampler(): expected grid and input to have same batch size, "
                           f"but got input with sizes {list(input.shape)} and grid with sizes "
                           f"{list(grid.shape)}")
    if input.dtype != grid.dtype:
        raise RuntimeError(f"grid_sampler(): expected input and grid to have the same dtype, "
                           f"but input has {input.dtype} and grid has {grid.dtype}")
    if any(s == 0 for s in input.shape[2:]):
        raise RuntimeError(f"grid_sampler(): expected input to have non-empty spatial "
                           f"dimensions, but input has sizes {list(input.shape)}")
    if mode == "bicubic" and nd != 2:
        raise RuntimeError("grid_sampler(): bicubic interpolation only supports 4D input")


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    _check_grid_sample(input, grid, mode, padding_mode)
    align_corners = bool(align_corners)
    nd = input.dim() - 2
    n, out_spatial = grid.shape[0], list(grid.shape[1:-1])
    points = grid.reshape(n, -1, nd)
    gatherer = _Gatherer(input)
    # grid[..., 0] is x (the last spatial dim), grid[..., 1] is y, grid[..., 2] is z
    raw = [_unnormalise(points[:, :, nd - 1 - d], gatherer.sizes[d], align_corners)
           for d in range(nd)]
    if mode == "bicubic":
        out = _bicubic(gatherer, raw, padding_mode, align_corners)
    else:
        coords = [_apply_padding(c, gatherer.sizes[d], padding_mode, align_corners)
                  for d, c in enumerate(raw)]
        out = _linear(gatherer, coords) if mode == "bilinear" else _nearest(gatherer, coords)
    return out.reshape([n, input.shape[1]] + out_spatial)
