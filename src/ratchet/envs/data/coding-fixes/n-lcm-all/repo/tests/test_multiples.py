from multiples import lcm, lcm_all


def test_lcm_pair():
    assert lcm(4, 6) == 12
    assert lcm(0, 5) == 0


def test_lcm_all():
    assert lcm_all([4, 6, 10]) == 60


def test_lcm_all_empty():
    assert lcm_all([]) == 1
