"""What is registered: GGUF files, models, families, and the pairs between them (registration, pairing,
names, the pair rows' copied columns, rechecks, stored token tables, local files).

Imports: results, access and the core modules.
"""
