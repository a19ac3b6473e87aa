"""pfor converter pack for nn ops (no converters yet: see the pack's issue)."""

__version__ = "0.3.0"
