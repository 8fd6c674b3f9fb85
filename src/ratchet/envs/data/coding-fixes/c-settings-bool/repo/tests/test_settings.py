from settings import load


def test_defaults_and_numbers():
    cfg = load("# local\nport = 9000\ntimeout = 0.5\n")
    assert cfg == {"host": "localhost", "port": 9000, "debug": False, "timeout": 0.5}


def test_debug_on():
    assert load("debug = Yes")["debug"] is True


def test_debug_off():
    assert load("debug = false")["debug"] is False
    assert load("debug = OFF")["debug"] is False
