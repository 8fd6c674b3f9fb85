from decimal import Decimal

from money import round_cents, split_bill


def test_plain_rounding():
    assert round_cents("1.234") == Decimal("1.23")
    assert round_cents(7) == Decimal("7.00")


def test_halves_round_away_from_zero():
    assert round_cents("2.675") == Decimal("2.68")
    assert round_cents("2.665") == Decimal("2.67")
    assert round_cents("-0.125") == Decimal("-0.13")


def test_split_bill():
    assert split_bill("10.00", 4) == Decimal("2.50")
