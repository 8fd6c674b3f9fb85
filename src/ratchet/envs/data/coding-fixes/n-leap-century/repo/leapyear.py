def is_leap(year):
    """Return True if year is a leap year in the Gregorian calendar.

    Years divisible by 4 are leap years, except centuries (divisible by 100),
    which are leap years only when they are also divisible by 400.
    """
    return year % 4 == 0 and year % 100 != 0


def days_in_year(year):
    """Return 366 for a leap year, 365 otherwise."""
    return 366 if is_leap(year) else 365
