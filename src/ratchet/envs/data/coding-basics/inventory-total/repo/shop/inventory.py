from shop.item import Item


class Inventory:
    def __init__(self):
        self.items = []

    def add(self, name, price, quantity=1):
        self.items.append(Item(name, price, quantity))

    def total_value(self):
        return sum(item.value() for item in self.items)
