"""Pricing rules.

A coupon of p percent takes p% off the order's subtotal once; totals are
rounded to cents.
"""


def discounted(amount, percent):
    """amount less percent% of it, rounded to cents."""
    return round(amount * (100 - percent) / 100, 2)


def order_total(lines, percent=0):
    """The total of (unit price, quantity) lines with a percent coupon applied once."""
    subtotal = sum(discounted(price, percent) * quantity for price, quantity in lines)
    return discounted(subtotal, percent)
