from point import Point


def test_diagonal_points_equal():
    assert Point(3, 3) == Point(3, 3)


def test_different_points_unequal():
    assert Point(1, 2) != Point(2, 1)


def test_equal_points_dedupe_in_set():
    assert Point(1, 2) == Point(1, 2)
    assert len({Point(1, 2), Point(1, 2), Point(5, 0)}) == 2
