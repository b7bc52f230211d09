"""Where a record was made: the abstract base of every record another installation may export (``import_kb``)."""

from __future__ import annotations

from django.db import models


class Provenance(models.Model):
    """Where a record was made, for records that came from another installation (``import_kb``).

    Empty ``origin_installation``: made here. Otherwise the other installation's id (its data
    folder's ``installation_id``) and the record's id there, so importing the same export twice
    finds what it already imported, and two installations' figures for the same cell stay apart.
    """

    origin_installation = models.CharField(max_length=64, blank=True, default="")
    origin_id = models.BigIntegerField(null=True, blank=True)
    origin_author = models.CharField(max_length=150, blank=True, default="")  # a user name there, not a user here
    imported_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True
