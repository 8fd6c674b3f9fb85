def strip_comment(line):
    """Return line without its '#' comment and without trailing whitespace.

    A '#' inside a single- or double-quoted string is part of the string, not
    the start of a comment. Leading indentation is kept.
    """
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch == '"':
            quote = ch
        elif ch == "#":
            return line[:i].rstrip()
    return line.rstrip()
