"""Invoices for orders shipped within Canada."""

__version__ = "0.4.1"
