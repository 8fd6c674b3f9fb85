def best(items, key):
    """Return the item with the largest key(item), or None if items is empty.

    When several items share the largest key, the first of them wins.
    """
    winner = None
    winner_key = None
    for item in items:
        k = key(item)
        if winner is None or k >= winner_key:
            winner = item
            winner_key = k
    return winner
