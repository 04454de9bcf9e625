"""tether.server layer (see docs/architecture.md)."""
