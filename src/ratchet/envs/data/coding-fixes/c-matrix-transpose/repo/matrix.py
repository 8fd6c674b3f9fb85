"""A small dense matrix of numbers, stored as a list of equal-length rows."""


class Matrix:
    def __init__(self, rows):
        if not rows or any(len(r) != len(rows[0]) for r in rows):
            raise ValueError("rows must be non-empty and of equal length")
        self.rows = [list(r) for r in rows]

    @property
    def shape(self):
        """(number of rows, number of columns)."""
        return len(self.rows), len(self.rows[0])

    def transpose(self):
        """The matrix whose rows are this matrix's columns."""
        n = len(self.rows)
        return Matrix([[self.rows[r][c] for r in range(n)] for c in range(n)])

    def __eq__(self, other):
        return isinstance(other, Matrix) and self.rows == other.rows

    def __repr__(self):
        return f"Matrix({self.rows})"
