from vowels import count_vowels


def test_lower_case():
    assert count_vowels("banana split") == 4


def test_no_vowels():
    assert count_vowels("rhythm 123!") == 0


def test_capitals_count():
    assert count_vowels("AEIOU") == 5
    assert count_vowels("Open Air") == 4
