from shop.inventory import Inventory

def test_single():
    inv = Inventory()
    inv.add("pen", 2.0)
    assert inv.total_value() == 2.0

def test_quantities():
    inv = Inventory()
    inv.add("pen", 2.0, quantity=3)
    inv.add("pad", 5.0, quantity=2)
    assert inv.total_value() == 16.0
