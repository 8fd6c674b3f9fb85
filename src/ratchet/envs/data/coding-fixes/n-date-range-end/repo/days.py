from datetime import date, timedelta


def date_range(start: date, end: date) -> list[date]:
    """Return every date from start to end, both included, in order.

    Returns an empty list when end is before start.
    """
    out = []
    day = start
    while day < end:
        out.append(day)
        day += timedelta(days=1)
    return out
