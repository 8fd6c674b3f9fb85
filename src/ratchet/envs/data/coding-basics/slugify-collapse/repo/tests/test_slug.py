from text.slug import slugify

def test_simple():
    assert slugify("Hello World") == "hello-world"

def test_collapse_and_trim():
    assert slugify("  Hello,   World!  ") == "hello-world"
    assert slugify("a -- b") == "a-b"
