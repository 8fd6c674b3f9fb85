import pytest

from bank import Account


def test_deposit_then_withdraw():
    acct = Account("ana", 100)
    acct.deposit(50)
    assert acct.withdraw(30) == 120


def test_over_limit_refused():
    acct = Account("ana", 1000, limit=200)
    with pytest.raises(ValueError):
        acct.withdraw(300)
    assert acct.balance == 1000


def test_overdraft_refused():
    acct = Account("ana", 40)
    with pytest.raises(ValueError):
        acct.withdraw(60)
    assert acct.balance == 40
