"""Figures attached to pairs: measured and reported results, the best of each, their history across
llama.cpp builds, the recommended llama-server command, and the reported examples shipped with specreg.

Imports: access and the core modules (models, cache_keys).
"""
