"""One Compare table: the measurements sharing a label, laid out as rows (num_threads,
env, sub_label or stmt) by columns (description)."""
import operator

from . import common
from ._table_cells import Column, Row


class Table:
    def __init__(self, results, colorize, trim_significant_figures, highlight_warnings):
        if len({r.label for r in results}) != 1:
            raise AssertionError("All results must share the same label")
        self.results = results
        self._colorize = colorize
        self._trim_significant_figures = trim_significant_figures
        self._highlight_warnings = highlight_warnings
        self.label = results[0].label
        self.time_unit, self.time_scale = common.select_unit(min(r.median for r in results))
        self.row_keys = common.ordered_unique([self.row_fn(r) for r in results])
        # Grouped by thread count and env; within those, statements keep their order.
        self.row_keys.sort(key=operator.itemgetter(slice(2)))
        self.column_keys = common.ordered_unique([self.col_fn(r) for r in results])
        self.rows, self.columns = self.populate_rows_and_columns()

    @staticmethod
    def row_fn(m):
        return m.num_threads, m.env, m.as_row_name

    @staticmethod
    def col_fn(m):
        return m.description

    def populate_rows_and_columns(self):
        grid = [[None for _ in self.column_keys] for _ in self.row_keys]
        row_position = {key: i for i, key in enumerate(self.row_keys)}
        col_position = {key: i for i, key in enumerate(self.column_keys)}
        for r in self.results:
            grid[row_position[self.row_fn(r)]][col_position[self.col_fn(r)]] = r

        envs = {r.env for r in self.results}
        render_env = len(envs) > 1
        # str(): an unspecified env (None) next to named ones prints as "(None)".
        env_str_len = max(len(str(e)) for e in envs) if render_env else 0
        row_name_str_len = max(len(r.as_row_name) for r in self.results)

        rows, rows_by_group = [], []
        prior_threads, prior_env, row_group = -1, "", -1
        for (num_threads, env, _), row in zip(self.row_keys, grid):
            new_group = num_threads != prior_threads
            if new_group:
                prior_threads, prior_env = num_threads, ""
                row_group += 1
                rows_by_group.append([])
            rows.append(Row(results=row, row_group=row_group,
                            render_env=render_env and env != prior_env,
                            env_str_len=env_str_len, row_name_str_len=row_name_str_len,
                            time_scale=self.time_scale, colorize=self._colorize,
                            num_threads=num_threads if new_group else None))
            rows_by_group[-1].append(row)
            prior_env = env

        columns = tuple(
            Column(grouped_results=[tuple(row[i] for row in group) for group in rows_by_group],
                   time_scale=self.time_scale, time_unit=self.time_unit,
                   trim_significant_figures=self._trim_significant_figures,
                   highlight_warnings=self._highlight_warnings)
            for i in range(len(self.column_keys)))
        rows = tuple(rows)
        for row in rows:
            row.register_columns(columns)
        return rows, columns

    def render(self):
        string_rows = [[""] + self.column_keys]
        string_rows.extend(r.as_column_strings() for r in self.rows)
        num_cols = max(len(r) for r in string_rows)
        for r in string_rows:
            r.extend("" for _ in range(num_cols - len(r)))
        # A None description (no columns named) renders as an empty header cell.
        string_rows[0] = ["" if c is None else c for c in string_rows[0]]

        col_widths = [max(len(cell) for cell in column) for column in zip(*string_rows)]
        lines = ["  |  ".join(c.center(w) for c, w in zip(string_rows[0], col_widths))]
        overall_width = len(lines[0])
        for string_row, row in zip(string_rows[1:], self.rows):
            lines.extend(row.row_separator(overall_width))
            lines.append("  |  ".join(row.finalize_column_strings(string_row, col_widths)))

        has_warnings = self._highlight_warnings and any(r.has_warnings for r in self.results)
        header = f"[{(' ' + (self.label or '') + ' ').center(overall_width - 2, '-')}]"
        footer = f"Times are in {common.unit_to_english(self.time_unit)}s ({self.time_unit})."
        warning = ("(! XX%) Measurement has high variance, where XX is the IQR / median * "
                   "100.\n" if has_warnings else "")
        return "\n".join([header, *lines, "", footer, warning])
