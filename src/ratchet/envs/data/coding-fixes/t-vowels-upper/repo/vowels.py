VOWELS = "aeiou"


def count_vowels(text):
    """Return how many vowels (a, e, i, o, u, in either case) text contains.

    'y' is not a vowel here; characters other than letters are ignored.
    """
    return sum(1 for ch in text if ch in VOWELS)
