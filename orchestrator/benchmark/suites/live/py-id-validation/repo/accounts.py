from validate import is_valid_id


def register(accounts, new_id):
    if not is_valid_id(new_id):
        raise ValueError(f"invalid id: {new_id!r}")
    accounts.add(new_id)
    return accounts
