"""Two-layer linear network (paper 000, Section III and Appendix E)."""
