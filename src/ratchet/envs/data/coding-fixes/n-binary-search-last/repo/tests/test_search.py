from search import find


def test_middle_and_absent():
    items = [1, 3, 5, 7, 9]
    assert find(items, 5) == 2
    assert find(items, 4) == -1
    assert find([], 1) == -1


def test_every_element_is_found():
    items = [1, 3, 5, 7, 9]
    assert [find(items, x) for x in items] == [0, 1, 2, 3, 4]


def test_single_element():
    assert find([42], 42) == 0
