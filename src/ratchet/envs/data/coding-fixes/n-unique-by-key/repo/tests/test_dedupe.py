from dedupe import unique_by


def test_plain_values_keep_order():
    assert unique_by([3, 1, 3, 2, 1]) == [3, 1, 2]


def test_key_case_insensitive():
    words = ["Apple", "apple", "Pear", "APPLE", "pear"]
    assert unique_by(words, key=str.lower) == ["Apple", "Pear"]


def test_key_on_records():
    rows = [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 1, "v": "c"}]
    assert unique_by(rows, key=lambda r: r["id"]) == rows[:2]
