from dataclasses import dataclass


@dataclass
class Item:
    name: str
    price: float
    quantity: int = 1

    def value(self):
        return self.price
