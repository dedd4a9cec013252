"""Placeholder: random number ops seeded by imperative.random.seed(n)."""
