"""The few statistics the measurements need, on plain lists of floats (times are a handful
of Python floats: no tensor is needed to summarize them)."""
import math


def quantile(sorted_values, q):
    """The q-quantile of ascending `sorted_values`, interpolating linearly between the two
    nearest ranks (torch.quantile's and numpy's default)."""
    position = q * (len(sorted_values) - 1)
    below = math.floor(position)
    above = min(below + 1, len(sorted_values) - 1)
    weight = position - below
    return sorted_values[below] + (sorted_values[above] - sorted_values[below]) * weight


def mean(values):
    return math.fsum(values) / len(values)


def population_std(values):
    """The standard deviation with divisor n (unbiased=False)."""
    m = mean(values)
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / len(values))


def log10(x):
    """log10 that follows IEEE for the edge cases as torch.log10 does (-inf at 0, nan below)
    instead of raising, so that callers fail (or not) where torch's code does."""
    if x == 0:
        return -math.inf
    if x < 0 or math.isnan(x):
        return math.nan
    return math.log10(x)
