"""Work that reaches the Hugging Face Hub or names a source: importing repositories, queued Hub jobs
(import, find drafts, check a pair), curated repositories, sources named by people, SPEED-Bench files.

Imports: table, catalog, results, access, the core modules and the inspector. Tasks are sent by name
(``registry.tasks``), so nothing here imports the runner.
"""
