from cases import snake_to_camel


def test_single_word():
    assert snake_to_camel("count") == "count"


def test_two_words():
    assert snake_to_camel("user_name") == "userName"


def test_extra_underscores():
    assert snake_to_camel("_max__retry_count_") == "maxRetryCount"
