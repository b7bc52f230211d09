"""The site's pages and JSON API: views, DRF views and serializers, forms, what model and pair pages
show, SVG plots, header uploads.

Imports: every registry layer below it (kb, hub, table, catalog, results, access) and the core modules.
"""
