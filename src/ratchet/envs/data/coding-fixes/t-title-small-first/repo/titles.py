SMALL_WORDS = {"a", "an", "and", "at", "for", "in", "of", "on", "or", "the", "to"}


def title_case(text):
    """Capitalize every word of text except small words (SMALL_WORDS), which stay
    lower case -- unless the small word is the first word, which is always capitalized."""
    words = text.lower().split()
    out = []
    for i, word in enumerate(words):
        if word in SMALL_WORDS:
            out.append(word)
        else:
            out.append(word.capitalize())
    return " ".join(out)
