from datetime import date

from workdays import add_business_days


def test_within_week():
    # Monday + 2 business days is Wednesday
    assert add_business_days(date(2024, 3, 4), 2) == date(2024, 3, 6)


def test_zero():
    assert add_business_days(date(2024, 3, 9), 0) == date(2024, 3, 9)


def test_friday_plus_one_is_monday():
    assert add_business_days(date(2024, 3, 1), 1) == date(2024, 3, 4)


def test_spans_two_weekends():
    assert add_business_days(date(2024, 3, 1), 6) == date(2024, 3, 11)
