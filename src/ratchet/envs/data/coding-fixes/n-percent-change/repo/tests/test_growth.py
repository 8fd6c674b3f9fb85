import pytest

from growth import percent_change


def test_no_change():
    assert percent_change(80, 80) == 0.0


def test_rise():
    assert percent_change(100, 150) == 50.0


def test_fall():
    assert percent_change(200, 150) == -25.0


def test_zero_old_rejected():
    with pytest.raises(ValueError):
        percent_change(0, 10)
