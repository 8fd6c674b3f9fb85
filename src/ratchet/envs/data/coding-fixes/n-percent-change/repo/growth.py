def percent_change(old, new):
    """Return the change from old to new as a percentage of old, rounded to 2 places.

    A rise from 100 to 150 is 50.0; a fall from 200 to 150 is -25.0.
    """
    if old == 0:
        raise ValueError("old value must be non-zero")
    return round((new - old) / new * 100, 2)
