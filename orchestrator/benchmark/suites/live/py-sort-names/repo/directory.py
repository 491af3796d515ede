from members import sorted_names


def listing(members):
    return ", ".join(sorted_names(members))
