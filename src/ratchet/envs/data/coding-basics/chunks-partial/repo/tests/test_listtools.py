from listtools import chunks

def test_exact():
    assert chunks([1, 2, 3, 4], 2) == [[1, 2], [3, 4]]

def test_partial_last_chunk():
    assert chunks([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]

def test_empty():
    assert chunks([], 3) == []
