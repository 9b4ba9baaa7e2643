"""What the project reads of torch beyond its public API, each read with a fallback (``compat.private_torch``)."""
