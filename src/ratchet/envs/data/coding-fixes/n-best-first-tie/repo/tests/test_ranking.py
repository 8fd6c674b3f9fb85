from ranking import best


def test_single_maximum():
    scores = [("ann", 3), ("bob", 7), ("cy", 5)]
    assert best(scores, key=lambda p: p[1]) == ("bob", 7)


def test_empty():
    assert best([], key=len) is None


def test_tie_keeps_first():
    scores = [("ann", 3), ("bob", 7), ("cy", 7)]
    assert best(scores, key=lambda p: p[1]) == ("bob", 7)
