import pytest

from duration import parse_duration

def test_minutes_seconds():
    assert parse_duration("5m10s") == 310

def test_hours():
    assert parse_duration("1h30m") == 5400
    assert parse_duration("2h") == 7200

def test_bad_unit():
    with pytest.raises(ValueError):
        parse_duration("3d")
