from comments import strip_comment


def test_plain_comment():
    assert strip_comment("    x = 1  # the answer") == "    x = 1"


def test_hash_in_double_quotes():
    assert strip_comment('color = "#ff0000"  # red') == 'color = "#ff0000"'


def test_hash_in_single_quotes():
    assert strip_comment("tag = '#todo'  # marker") == "tag = '#todo'"
