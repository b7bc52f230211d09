"""Predicting a setting's speedup before measuring it: the replay tool, forced pass, kept transcripts, cost models."""
