"""Parse `key = value` lines into a dict of typed settings.

Blank lines and lines starting with # are skipped; keys the text leaves out
keep their defaults from the schema; unknown keys raise KeyError.
"""
from settings.schema import DEFAULTS, coerce


def load(text):
    values = dict(DEFAULTS)
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, _, raw = line.partition("=")
        key = key.strip()
        if key not in DEFAULTS:
            raise KeyError(f"unknown setting {key!r}")
        values[key] = coerce(key, raw.strip())
    return values
