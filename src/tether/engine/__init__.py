"""tether.engine layer (see docs/architecture.md)."""
