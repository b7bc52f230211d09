"""Soaks: a deployed setting under a loop of requests for minutes to hours."""
