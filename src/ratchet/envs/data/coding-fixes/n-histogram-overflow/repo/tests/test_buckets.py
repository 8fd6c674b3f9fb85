from buckets import histogram


def test_values_inside_range():
    assert histogram([0, 4.5, 5, 9.99, 12], width=5, buckets=3) == [2, 2, 1]


def test_far_overflow_goes_to_last_bin():
    assert histogram([1, 40], width=10, buckets=3) == [1, 0, 1]


def test_value_at_upper_edge_goes_to_last_bin():
    assert histogram([29.9, 30, 35], width=10, buckets=3) == [0, 0, 3]
