"""A tiny shop: a cart of lines and the pricing rules that total it."""

from shop.cart import Cart

__all__ = ["Cart"]
