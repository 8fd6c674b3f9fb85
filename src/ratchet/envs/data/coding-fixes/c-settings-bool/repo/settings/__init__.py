"""Settings read from `key = value` text, typed by a small schema."""

from settings.loader import load

__all__ = ["load"]
