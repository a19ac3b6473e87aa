"""pfor converter pack for control flow (no converters yet: see the pack's issue)."""

__version__ = "0.3.0"
