"""The papers' claims, each stated once, and their verdicts against one run's results."""
