"""Ground shipping quotes for parcels."""

__version__ = "1.2.0"
