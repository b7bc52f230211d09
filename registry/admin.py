"""Admin for staff: browse everything, enter reported results; computed data stays read-only."""

from __future__ import annotations

from django.contrib import admin
from django.db import transaction

from registry.catalog.bases import recount_quants
from registry.catalog.removal import move_off
from registry.models import BaseModel, Family, GGUFFile, Model, Pair, ReportedResult, TokenizerClass, TokenTable
from registry.results.figures import refresh_best


@admin.register(GGUFFile)
class GGUFFileAdmin(admin.ModelAdmin):
    list_display = ("source", "architecture", "file_type", "parameter_count", "n_vocab", "inspected_at")
    list_filter = ("architecture", "vocab_type", "arch_kind")
    search_fields = ("source", "repo", "path")
    readonly_fields = [f.name for f in GGUFFile._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False  # files come in through import_hf / register_gguf, which inspect them

    # A quant's deletion moves the pairs checked on it to another quant of its base model (catalog.removal): they
    # and their results belong to the two models. The confirmation page lists what is really deleted.
    def get_deleted_objects(self, objs, request):
        with transaction.atomic():
            move_off([o.pk for o in objs])
            answer = super().get_deleted_objects(objs, request)
            transaction.set_rollback(True)  # only looked at: nothing moves until the deletion is confirmed
        return answer

    def delete_model(self, request, obj) -> None:
        base_id = obj.model.base_id
        with transaction.atomic():
            move_off([obj.pk])
            super().delete_model(request, obj)
        recount_quants([base_id])  # the table's quant counts

    def delete_queryset(self, request, queryset) -> None:
        base_ids = list(queryset.values_list("model__base_id", flat=True))
        with transaction.atomic():
            move_off(list(queryset.values_list("pk", flat=True)))
            super().delete_queryset(request, queryset)
        recount_quants(base_ids)


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = ("target", "draft", "compatible", "failed_rule", "size_ratio", "best_kind", "best_speedup")
    list_filter = ("compatible", "failed_rule", "best_kind")
    search_fields = ("target__source", "draft__source")
    readonly_fields = [f.name for f in Pair._meta.fields]
    list_select_related = ("target", "draft")

    def has_add_permission(self, request) -> bool:
        return False  # pairs are computed, never typed in


@admin.register(ReportedResult)
class ReportedResultAdmin(admin.ModelAdmin):
    list_display = ("pair", "k", "acceptance", "speedup", "content_type", "hardware", "citation")
    list_filter = ("content_type",)
    raw_id_fields = ("pair",)
    search_fields = ("citation", "pair__target__source", "pair__draft__source")

    def save_model(self, request, obj, form, change) -> None:
        if not obj.reported_by_id:
            obj.reported_by = request.user
        super().save_model(request, obj, form, change)
        refresh_best(obj.pair)

    def delete_model(self, request, obj) -> None:
        pair = obj.pair
        super().delete_model(request, obj)
        refresh_best(pair)

    def delete_queryset(self, request, queryset) -> None:
        # "Delete selected" too: every pair that lost a result gets its best recomputed.
        pairs = list(Pair.objects.filter(pk__in=queryset.values("pair_id")))
        super().delete_queryset(request, queryset)
        for pair in pairs:
            refresh_best(pair)


@admin.register(Model)
class ModelAdmin(admin.ModelAdmin):
    list_display = ("name", "repo", "architecture", "parameter_count", "family", "base")
    search_fields = ("name", "repo")


@admin.register(Family)
class FamilyAdmin(admin.ModelAdmin):
    list_display = ("name", "vocab_type", "key")
    search_fields = ("name", "key")


@admin.register(TokenTable)
class TokenTableAdmin(admin.ModelAdmin):
    list_display = ("sha256", "count", "created_at")
    exclude = ("blob",)
    readonly_fields = ("sha256", "count", "created_at")


@admin.register(BaseModel)
class BaseModelAdmin(admin.ModelAdmin):
    list_display = ("name", "rule", "architecture", "parameter_count", "key")
    search_fields = ("name", "key")
    list_filter = ("rule",)


@admin.register(TokenizerClass)
class TokenizerClassAdmin(admin.ModelAdmin):
    list_display = ("fingerprint", "vocab_type", "n_tokens", "add_bos", "add_eos", "vocab_key")
    search_fields = ("fingerprint", "vocab_key")
    readonly_fields = ("fingerprint", "token_table", "created_at")
