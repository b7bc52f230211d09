"""The pairs table's read side: the query string (request), its filters, the rows read from stored columns (rows,
records), their cells, the filter menus, keyset pages and the rendered cache.

Imports: results, access, the stored adaptability decisions and the core modules; never the catalog modules that
decide verdicts (an import-linter contract). What apps above it add is named in settings (registry.hooks): the
notes the search also matches (``SPECREG_TABLE_SEARCH_HOOKS``) and the N of M quants of a partial row
(``SPECREG_TABLE_QUANT_COUNTS``).
"""
