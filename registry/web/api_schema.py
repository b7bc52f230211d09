"""The OpenAPI schema's view of who may call what: an operation anonymous callers may use lists no security.

drf-spectacular lists every authentication scheme on every operation and adds ``{}`` (no credentials) where the
permission lets anonymous callers in (a GET under IsAuthenticatedOrReadOnly); Swagger UI draws a padlock on any
operation that lists security, so /api/docs/ showed the open reads as locked. Those operations list none; a
token sent with them is still read (it may see more, as on the pages), and writes keep their padlocks.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.openapi import AutoSchema


class OpenReadsSchema(AutoSchema):
    def get_auth(self) -> list[Any]:
        auths = super().get_auth()
        return [] if {} in auths else auths
