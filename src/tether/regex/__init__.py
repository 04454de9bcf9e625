"""tether.regex layer (see docs/architecture.md)."""
