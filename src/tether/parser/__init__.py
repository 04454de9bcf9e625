"""tether.parser layer (see docs/architecture.md)."""
