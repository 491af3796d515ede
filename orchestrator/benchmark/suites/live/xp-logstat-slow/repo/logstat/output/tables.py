"""Plain-text tables: columns left-aligned, two spaces apart."""


def table(rows):
    rows = [tuple(str(cell) for cell in row) for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip()
                     for row in rows)
