DEFAULTS = {"timeout": 30, "retries": 3, "verbose": False}


def load_settings(user):
    """The defaults overlaid with the user's settings."""
    unknown = set(user) - set(DEFAULTS)
    if unknown:
        raise KeyError(f"unknown settings: {sorted(unknown)}")
    merged = dict(user)
    merged.update(DEFAULTS)
    return merged
