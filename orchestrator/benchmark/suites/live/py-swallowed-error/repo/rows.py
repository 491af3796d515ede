def parse_row(line, number):
    """("name", count) from "name,count"; ValueError naming the line otherwise."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 2 or not parts[1].isdigit():
        raise ValueError(f"line {number}: expected name,count but got {line.strip()!r}")
    return parts[0], int(parts[1])
