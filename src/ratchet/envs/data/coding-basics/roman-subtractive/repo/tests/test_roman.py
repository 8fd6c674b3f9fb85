from roman import to_roman

def test_additive():
    assert to_roman(3) == "III" and to_roman(1666) == "MDCLXVI"

def test_subtractive():
    assert to_roman(4) == "IV"
    assert to_roman(9) == "IX"
    assert to_roman(1994) == "MCMXCIV"
