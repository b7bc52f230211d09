"""Who may do what with the server's resources: its Hugging Face token, its header budget, its paths."""

from __future__ import annotations

from contextlib import AbstractContextManager

from django.conf import settings

from inspector.hub_names import hub_access


def may_use_server_token(user) -> bool:
    """Staff, or a signed-in user given ``registry.use_server_token``; never an anonymous visitor."""
    if user is None or not user.is_authenticated or not user.is_active:
        return False
    return user.is_staff or user.has_perm("registry.use_server_token")


def hub_reads_for(user) -> AbstractContextManager[None]:
    """Hub requests made inside go with the server's token only for a user allowed to use it."""
    return hub_access(server_token=may_use_server_token(user))


def header_cap(user) -> int:
    """The most header bytes one remote read may take for this user."""
    if may_use_server_token(user):
        return settings.SPECREG_MAX_HEADER_BYTES
    return min(settings.SPECREG_PUBLIC_MAX_HEADER_BYTES, settings.SPECREG_MAX_HEADER_BYTES)


def may_see_paths(user) -> bool:
    """Server paths (local sources, the data folder) are shown to signed-in users only."""
    return user is not None and user.is_authenticated
