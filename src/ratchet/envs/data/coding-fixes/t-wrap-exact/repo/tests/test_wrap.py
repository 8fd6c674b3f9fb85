from wrap import wrap


def test_short_text_one_line():
    assert wrap("hello world", 20) == ["hello world"]


def test_long_word_alone():
    assert wrap("a extraordinarily b", 5) == ["a", "extraordinarily", "b"]


def test_line_fills_width_exactly():
    assert wrap("the cat sat on a mat", 7) == ["the cat", "sat on", "a mat"]
