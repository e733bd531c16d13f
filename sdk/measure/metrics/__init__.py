"""Evaluation protocols scored exactly as their official code: pairwise, pcp, par."""
