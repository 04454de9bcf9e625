"""tether.decoding layer (see docs/architecture.md)."""
