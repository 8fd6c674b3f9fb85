def snake_to_camel(name):
    """Convert a snake_case name to camelCase: 'user_first_name' -> 'userFirstName'.

    The first word stays lower case; each later word gets an upper-case first letter.
    Leading, trailing and repeated underscores are ignored.
    """
    parts = [p for p in name.lower().split("_") if p]
    if not parts:
        return ""
    return parts[0] + "".join(p.upper() for p in parts[1:])
