from leapyear import days_in_year, is_leap


def test_ordinary_years():
    assert is_leap(2024)
    assert not is_leap(2023)


def test_plain_century_is_not_leap():
    assert not is_leap(1900)


def test_400_year_century_is_leap():
    assert is_leap(2000)
    assert days_in_year(2000) == 366
