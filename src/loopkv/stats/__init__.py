"""Uncertainty for reported numbers: 95% intervals and n beside every accuracy."""
