"""Single-layer linear network (paper 000, Section II)."""
