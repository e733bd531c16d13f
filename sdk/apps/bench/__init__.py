"""``pairedge bench``: latency, accuracy and agreement per backend and precision, and a recommendation."""
