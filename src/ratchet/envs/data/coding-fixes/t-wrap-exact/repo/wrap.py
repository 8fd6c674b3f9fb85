def wrap(text, width):
    """Greedy word wrap: return the lines of text, each at most width characters.

    Words are separated by single spaces within a line; a word longer than width
    gets a line of its own.
    """
    lines = []
    line = ""
    for word in text.split():
        if not line:
            line = word
        elif len(line) + 1 + len(word) < width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines
