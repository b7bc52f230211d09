"""Measuring one benchmark cell: with the command-line tools, through llama-server, and under load."""
