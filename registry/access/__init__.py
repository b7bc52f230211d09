"""Who may do what, and how much: the server's token and paths, client addresses, rate limits, login
throttling, job limits, the JSON nesting limit, what anonymous visitors may see.

Imports: registry.models and the other core modules only (the lowest layer).
"""
