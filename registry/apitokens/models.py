"""A name for each API token, so that its owner knows which one a CI job uses before revoking it.

The token itself is knox's AuthToken: its SHA-512 digest and the first characters (``token_key``, what
knox looks it up by); never the token in clear.
"""

from __future__ import annotations

from django.db import models
from knox.models import AuthToken


class TokenName(models.Model):
    token = models.OneToOneField(AuthToken, on_delete=models.CASCADE, related_name="name_record")
    name = models.CharField(max_length=100)

    def __str__(self) -> str:
        return self.name
