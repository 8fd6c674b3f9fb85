from cipher import caesar


def test_simple_shift_keeps_case_and_punctuation():
    assert caesar("Hello, World!", 1) == "Ifmmp, Xpsme!"


def test_wraps_past_z():
    assert caesar("xyz", 3) == "abc"
    assert caesar("XYZ", 3) == "ABC"


def test_round_trip():
    assert caesar(caesar("Attack at dawn", 13), -13) == "Attack at dawn"
