def center(text, width, fill=" "):
    """Pad text with fill on both sides to width characters.

    When the padding cannot be split evenly, the extra fill character goes on
    the right. Text already width long or longer is returned unchanged.
    """
    total = width - len(text)
    if total <= 0:
        return text
    left = (total + 1) // 2
    right = total - left
    return fill * left + text + fill * right
