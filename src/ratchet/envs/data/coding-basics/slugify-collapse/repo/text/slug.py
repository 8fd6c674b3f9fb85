import re


def slugify(title):
    """'Hello, World!' -> 'hello-world'."""
    lowered = title.strip().lower()
    return re.sub(r"[^a-z0-9]", "-", lowered)
