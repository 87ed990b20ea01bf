"""The columns and rows of a Compare table: how each measurement becomes a cell string,
and which cells are colored."""
import itertools
import math

from . import common
from ._colorize import Colorize

BEST = "\033[92m"
GOOD = "\033[34m"
BAD = "\033[2m\033[91m"
VERY_BAD = "\033[31m"
BOLD = "\033[1m"
TERMINATE = "\033[0m"


def _leading_digits(value):
    return int(math.ceil(math.log10(value)))


class Column:
    """One description's results (grouped by thread count). Picks one number format for
    the whole column: enough integer digits for its largest median and, when trimming
    significant figures, only the decimals that the least precise result supports."""

    def __init__(self, grouped_results, time_scale, time_unit, trim_significant_figures,
                 highlight_warnings):
        self._grouped_results = grouped_results
        self._flat_results = list(itertools.chain.from_iterable(grouped_results))
        self._time_scale = time_scale
        self._time_unit = time_unit
        self._trim_significant_figures = trim_significant_figures
        self._highlight_warnings = highlight_warnings and any(
            r.has_warnings for r in self._flat_results if r)
        digits = [_leading_digits(r.median / time_scale) if r else None
                  for r in self._flat_results]
        unit_digits = max(d for d in digits if d is not None)
        if trim_significant_figures:
            decimal_digits = min(max(m.significant_figures - d, 0)
                                 for d, m in zip(digits, self._flat_results)
                                 if m is not None and d is not None)
        else:
            decimal_digits = 1
        length = unit_digits + decimal_digits + (1 if decimal_digits else 0)
        warn_width = 7 if self._highlight_warnings else 0
        self._template = f"{{:>{length}.{decimal_digits}f}}{{:>{warn_width}}}"

    def get_results_for(self, group):
        return self._grouped_results[group]

    def num_to_str(self, value, estimated_sigfigs, spread):
        """The cell text of a median (blank of the same width for a missing result);
        spread (IQR / median) is shown as "(! 12%)" when warnings are highlighted."""
        if value is None:
            return " " * len(self.num_to_str(1, estimated_sigfigs, None))
        if self._trim_significant_figures:
            value = common.trim_sigfig(value, estimated_sigfigs)
        note = (f" (! {spread * 100:.0f}%)"
                if self._highlight_warnings and spread is not None else "")
        return self._template.format(value, note)


def _optional_min(values):
    values = list(values)
    return min(values) if values else None


class Row:
    """One (num_threads, env, row name) line of the table."""

    def __init__(self, results, row_group, render_env, env_str_len, row_name_str_len,
                 time_scale, colorize, num_threads=None):
        self._results = results
        self._row_group = row_group
        self._render_env = render_env
        self._env_str_len = env_str_len
        self._row_name_str_len = row_name_str_len
        self._time_scale = time_scale
        self._colorize = colorize
        self._columns = ()
        self._num_threads = num_threads

    def register_columns(self, columns):
        self._columns = columns

    def as_column_strings(self):
        present = [r for r in self._results if r is not None]
        env = f"({present[0].env})" if self._render_env else ""
        output = ["  " + env.ljust(self._env_str_len + 4) + present[0].as_row_name]
        for m, column in zip(self._results, self._columns or ()):
            if m is None:
                output.append(column.num_to_str(None, 1, None))
            else:
                output.append(column.num_to_str(
                    m.median / self._time_scale, m.significant_figures,
                    m.iqr / m.median if m.has_warnings else None))
        return output

    @staticmethod
    def color_segment(segment, value, best_value):
        """Green: within 1% (or 100 ns) of the best; blue: within 10%; dim red: 2x or
        more; red: 5x or more; plain otherwise."""
        if value <= best_value * 1.01 or value <= best_value + 100e-9:
            return BEST + BOLD + segment + TERMINATE * 2
        if value <= best_value * 1.1:
            return GOOD + BOLD + segment + TERMINATE * 2
        if value >= best_value * 5:
            return VERY_BAD + BOLD + segment + TERMINATE * 2
        if value >= best_value * 2:
            return BAD + segment + TERMINATE * 2
        return segment

    def row_separator(self, overall_width):
        if self._num_threads is None:
            return []
        return [f"{self._num_threads} threads: ".ljust(overall_width, "-")]

    def finalize_column_strings(self, column_strings, col_widths):
        """The cells centred in their widths and, when colorizing, colored against the best
        median of the row (rowwise) or of the column within this thread group."""
        best_values = [-1 for _ in column_strings]
        if self._colorize == Colorize.ROWWISE:
            row_min = min(r.median for r in self._results if r is not None)
            best_values = [row_min for _ in column_strings]
        elif self._colorize == Colorize.COLUMNWISE:
            best_values = [
                _optional_min(r.median for r in column.get_results_for(self._row_group)
                              if r is not None)
                for column in (self._columns or ())]
        contents = [column_strings[0].ljust(col_widths[0])]
        for text, width, result, best in zip(column_strings[1:], col_widths[1:],
                                             self._results, best_values):
            text = text.center(width)
            if self._colorize != Colorize.NONE and result is not None and best is not None:
                text = self.color_segment(text, result.median, best)
            contents.append(text)
        return contents
