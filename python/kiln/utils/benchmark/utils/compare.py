"""Compare: prints many Measurements as tables, one per label."""
import collections

from . import common
from ._colorize import Colorize
from ._table import Table

__all__ = ["Colorize", "Compare"]


class Compare:
    """Tables of the medians of `results`: one table per label, a row per sub_label (or
    stmt) and num_threads / env, a column per description. Replicates of the same task
    are merged first. str() or print() renders it."""

    def __init__(self, results):
        self._results = []
        self.extend_results(results)
        self._trim_significant_figures = False
        self._colorize = Colorize.NONE
        self._highlight_warnings = False

    def __str__(self):
        return "\n".join(self._render())

    def extend_results(self, results):
        """Adds more Measurements (anything else is a ValueError)."""
        for r in results:
            if not isinstance(r, common.Measurement):
                raise ValueError(f"Expected an instance of `Measurement`, got {type(r)} "
                                 f"instead.")
        self._results.extend(results)

    def trim_significant_figures(self):
        """Print only the digits each measurement's spread supports."""
        self._trim_significant_figures = True

    def colorize(self, rowwise=False):
        """Color cells by how they compare with the best of their column (default) or
        row."""
        self._colorize = Colorize.ROWWISE if rowwise else Colorize.COLUMNWISE

    def highlight_warnings(self):
        """Mark cells with a high-variance measurement by their IQR / median."""
        self._highlight_warnings = True

    def print(self):
        print(str(self))

    def _render(self):
        results = common.Measurement.merge(self._results)
        grouped = self._group_by_label(results)
        return [self._layout(group) for group in grouped.values()]

    def _group_by_label(self, results):
        grouped = collections.defaultdict(list)
        for r in results:
            grouped[r.label].append(r)
        return grouped

    def _layout(self, results):
        return Table(results, self._colorize, self._trim_significant_figures,
                     self._highlight_warnings).render()
