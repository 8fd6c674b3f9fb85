def unique_by(items, key=None):
    """Return items without duplicates, keeping the first of each, in order.

    Two items are duplicates when key(item) is equal; with no key the items
    themselves are compared.
    """
    seen = set()
    out = []
    for item in items:
        k = item if key is None else key(item)
        if k not in seen:
            seen.add(item)
            out.append(item)
    return out
