"""How Compare colors its cells: not at all, against the best of each column, or against
the best of each row."""
import enum


class Colorize(enum.Enum):
    NONE = "none"
    COLUMNWISE = "columnwise"
    ROWWISE = "rowwise"
