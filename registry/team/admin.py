"""Admin for staff: notes (hide, read history), deployments (set URLs, retire), samples read-only."""

from __future__ import annotations

from django.contrib import admin

from registry.team.models import Deployment, Note, NoteVersion, TelemetrySample


class NoteVersionInline(admin.TabularInline):
    model = NoteVersion
    extra = 0
    can_delete = False
    readonly_fields = ("body", "author_name", "written_at", "replaced_by", "replaced_at")


@admin.register(Note)
class NoteAdmin(admin.ModelAdmin):
    list_display = ("pk", "author_name", "model", "file", "pair", "run", "created_at", "hidden")
    list_filter = ("hidden",)
    search_fields = ("body", "author_name")
    raw_id_fields = ("model", "file", "pair", "run", "author", "hidden_by")
    inlines = [NoteVersionInline]


@admin.register(Deployment)
class DeploymentAdmin(admin.ModelAdmin):
    list_display = ("pk", "target", "draft", "method", "k", "host", "author_name", "deployed_at", "retired_at")
    list_filter = ("method",)
    search_fields = ("target__source", "draft__source", "host", "command")
    raw_id_fields = ("target", "draft", "pair", "run", "created_by")


@admin.register(TelemetrySample)
class TelemetrySampleAdmin(admin.ModelAdmin):
    list_display = ("deployment", "scraped_at", "ok", "reset", "draft_tokens", "accepted_tokens", "error")
    list_filter = ("ok", "reset")
    readonly_fields = [f.name for f in TelemetrySample._meta.fields]
