"""Recipes: how the bundled model is built (training, link policy, QAT) from the build layer."""
