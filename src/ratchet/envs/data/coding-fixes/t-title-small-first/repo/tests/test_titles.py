from titles import title_case


def test_small_words_in_middle():
    assert title_case("war and peace") == "War and Peace"


def test_mixed_input_case():
    assert title_case("a TALE of two CITIES") == "A Tale of Two Cities"


def test_first_word_small():
    assert title_case("the lord of the rings") == "The Lord of the Rings"
