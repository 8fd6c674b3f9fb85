"""A shopping cart: lines of (name, unit price, quantity) and one optional coupon."""
from shop.pricing import order_total


class Cart:
    def __init__(self):
        self.lines = {}
        self.coupon_percent = 0

    def add(self, name, price, quantity=1):
        _, held = self.lines.get(name, (price, 0))
        self.lines[name] = (price, held + quantity)

    def apply_coupon(self, percent):
        if not 0 <= percent <= 100:
            raise ValueError("coupon percent must be between 0 and 100")
        self.coupon_percent = percent

    def total(self):
        return order_total(self.lines.values(), self.coupon_percent)
