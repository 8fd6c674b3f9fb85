import string

ALPHABET_SIZE = len(string.ascii_lowercase)


def caesar(text, shift):
    """Shift every ASCII letter of text by shift places, wrapping around the
    alphabet and keeping its case; other characters are left as they are.
    A negative shift moves letters backwards."""
    out = []
    for ch in text:
        if ch in string.ascii_lowercase or ch in string.ascii_uppercase:
            base = ord("a") if ch.islower() else ord("A")
            out.append(chr(base + (ord(ch) - base + shift) % (ALPHABET_SIZE - 1)))
        else:
            out.append(ch)
    return "".join(out)
