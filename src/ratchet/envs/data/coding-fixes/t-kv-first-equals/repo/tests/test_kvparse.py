from kvparse import parse_pairs


def test_simple_pairs():
    assert parse_pairs("host = example.org; port=8080;") == {"host": "example.org", "port": "8080"}


def test_key_without_value():
    assert parse_pairs("debug; level=2") == {"debug": "", "level": "2"}


def test_value_with_equals():
    assert parse_pairs("user=ann; token=abc==") == {"user": "ann", "token": "abc=="}
