def deep_merge(base, override):
    """A new dict: base's keys, with override's values winning; nested dicts are merged."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out
