from words import word_count

def test_simple():
    assert word_count("a b a") == {"a": 2, "b": 1}

def test_case_and_punctuation():
    assert word_count("The cat, the hat. THE end!") == {"the": 3, "cat": 1, "hat": 1, "end": 1}
