from cache import LRUCache

def test_keeps_capacity():
    c = LRUCache(2)
    for k in "abc":
        c.put(k, k.upper())
    assert len(c.data) == 2

def test_evicts_least_recent():
    c = LRUCache(2)
    c.put("a", 1)
    c.put("b", 2)
    c.get("a")
    c.put("c", 3)
    assert c.get("b") is None
    assert c.get("a") == 1 and c.get("c") == 3
