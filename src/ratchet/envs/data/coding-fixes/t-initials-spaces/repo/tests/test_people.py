from people import initials


def test_simple_name():
    assert initials("ada king lovelace") == "A.K.L."


def test_single_word():
    assert initials("plato") == "P."


def test_extra_spaces():
    assert initials("  grace   brewster hopper ") == "G.B.H."
