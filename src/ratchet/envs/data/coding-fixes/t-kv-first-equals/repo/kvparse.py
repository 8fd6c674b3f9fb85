def parse_pairs(text, sep=";"):
    """Parse 'key=value' items separated by sep into a dict of strings.

    Keys and values are stripped of surrounding spaces; empty items are skipped.
    The key ends at the first '=', so a value may itself contain '='.
    An item without '=' maps its key to the empty string.
    """
    result = {}
    for item in text.split(sep):
        if not item.strip():
            continue
        key, _, value = item.rpartition("=") if "=" in item else (item, "", "")
        result[key.strip()] = value.strip()
    return result
