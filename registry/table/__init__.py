"""The pairs table: search, filters, sort orders, keyset pages, the rendered cache.

Imports: catalog, results, access and the core modules. Notes reach its search through a hook
(``registry.table.query.query.SEARCH_HOOKS``, filled by the team app), not an import.
"""
