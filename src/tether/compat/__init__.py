"""tether.compat: other libraries' surfaces on tether (``tether.compat.lmql``)."""
