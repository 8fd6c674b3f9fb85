from decimal import ROUND_HALF_EVEN, Decimal

CENT = Decimal("0.01")


def round_cents(amount):
    """Round a money amount (str, int or Decimal) to whole cents.

    Exact halves round away from zero: 2.665 -> 2.67, -0.125 -> -0.13.
    """
    return Decimal(str(amount)).quantize(CENT, rounding=ROUND_HALF_EVEN)


def split_bill(total, people):
    """Each person's share of total, rounded to cents."""
    return round_cents(Decimal(str(total)) / people)
