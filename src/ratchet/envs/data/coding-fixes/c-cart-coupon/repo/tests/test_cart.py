from shop import Cart


def test_total_without_coupon():
    cart = Cart()
    cart.add("pen", 2.50, 4)
    cart.add("pad", 5.00)
    cart.add("pen", 2.50)
    assert cart.total() == 17.50


def test_total_with_coupon():
    cart = Cart()
    cart.add("pen", 2.50, 4)
    cart.add("pad", 10.00)
    cart.apply_coupon(10)
    assert cart.total() == 18.00
