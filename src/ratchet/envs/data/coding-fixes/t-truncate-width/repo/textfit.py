ELLIPSIS = "..."


def truncate(text, width):
    """Shorten text to at most width characters.

    Text that already fits is returned unchanged. Otherwise it is cut and ends
    with ELLIPSIS, and the whole result (ellipsis included) is exactly width long.
    width is at least len(ELLIPSIS).
    """
    if len(text) <= width:
        return text
    return text[:width] + ELLIPSIS
