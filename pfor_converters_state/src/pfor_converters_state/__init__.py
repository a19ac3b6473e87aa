"""pfor converter pack for state ops (no converters yet: see the pack's issue)."""

__version__ = "0.2.0"
