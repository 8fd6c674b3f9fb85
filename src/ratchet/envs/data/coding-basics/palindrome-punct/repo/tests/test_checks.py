from checks import is_palindrome

def test_simple():
    assert is_palindrome("level") and not is_palindrome("hello")

def test_ignores_case_and_punctuation():
    assert is_palindrome("A man, a plan, a canal: Panama")
    assert is_palindrome("No 'x' in Nixon")
