"""A shareable knowledge base: everything an installation knows, as versioned JSON with provenance.

``export.export_kb`` writes it, ``importer.import_kb`` merges one into this installation (one
transaction; importing twice changes nothing; figures from elsewhere are kept beside ours with
the installation they came from). ``schema`` is the format and its bounds, ``sections`` lets
other apps (notes, deployments, telemetry) add their records with one export and one import
function each.
"""
