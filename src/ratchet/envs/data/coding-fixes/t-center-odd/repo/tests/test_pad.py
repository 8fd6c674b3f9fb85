from pad import center


def test_even_padding():
    assert center("abc", 7, "*") == "**abc**"


def test_too_long_unchanged():
    assert center("abcdef", 4) == "abcdef"


def test_odd_padding_extra_on_right():
    assert center("ab", 5) == " ab  "
    assert center("x", 4, "-") == "-x--"
