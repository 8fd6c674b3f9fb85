"""The known settings, their defaults, and how a raw string becomes a value.

A setting's type is its default's type. Booleans accept true/false, yes/no,
on/off and 1/0 in any letter case.
"""

DEFAULTS = {"host": "localhost", "port": 8080, "debug": False, "timeout": 2.5}

TRUE_WORDS = {"true", "yes", "on", "1"}
FALSE_WORDS = {"false", "no", "off", "0"}


def coerce(key, raw):
    kind = type(DEFAULTS[key])
    if kind is bool:
        word = raw.lower()
        if word not in TRUE_WORDS | FALSE_WORDS:
            raise ValueError(f"{key}: {raw!r} is not a boolean")
        return bool(word)
    return kind(raw)
