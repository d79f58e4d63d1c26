"""Figures: one module per figure family; functions take Datasets and return Figures."""
