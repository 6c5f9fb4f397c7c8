"""The package version, kept in one place (read by setup.py too)."""

__version__ = "0.1.0"
