from paging import page, page_count


def render(items, number, size=3):
    """One page of a listing with a footer."""
    shown = page(items, number, size)
    lines = [f"- {item}" for item in shown]
    lines.append(f"page {number} of {page_count(len(items), size)}")
    return "\n".join(lines)
