"""Evaluation: streaming generation through a KV method, likelihood scoring, task metrics."""
