def initials(full_name):
    """Return the initials of full_name, upper case, each followed by a dot.

    initials("ada king lovelace") -> "A.K.L."; any run of whitespace separates words.
    """
    words = full_name.split(" ")
    return "".join(word[0].upper() + "." for word in words)
