from datetime import date, timedelta


def add_business_days(start: date, n: int) -> date:
    """Return the date n business days (Monday to Friday) after start.

    Weekends are skipped; n == 0 returns start unchanged.
    """
    day = start
    added = 0
    while added < n:
        day += timedelta(days=1)
        if day.weekday() < 6:
            added += 1
    return day
