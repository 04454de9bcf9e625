"""tether.lang layer (see docs/architecture.md)."""
