"""tether.tokens layer (see docs/architecture.md)."""
