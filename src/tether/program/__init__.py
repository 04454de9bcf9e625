"""tether.program layer (see docs/architecture.md)."""
