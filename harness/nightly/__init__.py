"""`harness nightly NIGHTLY.yaml`: follow kernel sources over time, run a
matrix of plans on their new heads, compare each with its previous night."""
