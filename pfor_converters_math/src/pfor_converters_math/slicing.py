"""slicing converters (to be written)."""


def register(registry):
    """Add this family's converters to the pack's registrar."""
