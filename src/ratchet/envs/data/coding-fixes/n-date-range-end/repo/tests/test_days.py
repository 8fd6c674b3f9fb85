from datetime import date

from days import date_range


def test_end_before_start():
    assert date_range(date(2024, 3, 5), date(2024, 3, 1)) == []


def test_across_month_end():
    got = date_range(date(2024, 2, 28), date(2024, 3, 1))
    assert got == [date(2024, 2, 28), date(2024, 2, 29), date(2024, 3, 1)]


def test_single_day():
    assert date_range(date(2024, 1, 1), date(2024, 1, 1)) == [date(2024, 1, 1)]
