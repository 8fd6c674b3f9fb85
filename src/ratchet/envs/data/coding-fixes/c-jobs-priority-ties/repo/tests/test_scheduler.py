from jobs import Scheduler


def drain(s):
    out = []
    while len(s):
        out.append(s.next())
    return out


def test_most_urgent_first():
    s = Scheduler()
    s.submit("backup", 3)
    s.submit("page-oncall", 1)
    s.submit("report", 2)
    assert drain(s) == ["page-oncall", "report", "backup"]
    assert s.next() is None


def test_equal_priority_in_submission_order():
    s = Scheduler()
    for name in ("a", "b", "c"):
        s.submit(name, 2)
    s.submit("urgent", 1)
    assert drain(s) == ["urgent", "a", "b", "c"]
