from textfit import truncate


def test_fits_unchanged():
    assert truncate("short", 10) == "short"
    assert truncate("exactly10!", 10) == "exactly10!"


def test_cut_with_ellipsis():
    assert truncate("The quick brown fox", 10) == "The qui..."


def test_cut_length():
    for width in range(3, 12):
        assert len(truncate("abcdefghijklmnopqrstuvwxyz", width)) == width
