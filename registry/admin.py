"""Admin for staff: browse everything, enter reported results; computed data stays read-only."""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.db import transaction

from registry.cache_keys import bump_generation
from registry.catalog.bases import recount_quants
from registry.catalog.combinations import pair_combinations
from registry.catalog.regroup import merge, move_out
from registry.catalog.removal import move_off
from registry.catalog.settling import resettle, settle
from registry.models import (
    BaseModel,
    BenchmarkRun,
    Family,
    GGUFFile,
    Model,
    Pair,
    PairCheckResult,
    ReportedResult,
    TokenizerClass,
    TokenTable,
)
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
        recount_quants([base_id])  # the table's quant counts, and each class's
        resettle([base_id])  # a class may have gone with the file

    def delete_queryset(self, request, queryset) -> None:
        base_ids = list(queryset.values_list("model__base_id", flat=True))
        with transaction.atomic():
            move_off(list(queryset.values_list("pk", flat=True)))
            super().delete_queryset(request, queryset)
        recount_quants(base_ids)
        resettle(base_ids)


class PairFilesForm(forms.ModelForm):
    """Staff pin the files a pair shows, checks and benchmarks by default: one of each side's base model."""

    class Meta:
        model = Pair
        fields = ("target", "draft", "files_pinned")

    def clean(self) -> dict:
        data = super().clean() or {}
        p = self.instance
        for side, base_id in (("target", p.target_base_id), ("draft", p.draft_base_id)):
            f = data.get(side)
            if f is not None and base_id is not None and f.model.base_id != base_id:
                self.add_error(side, f"not a file of this pair's {side} base model")
        t, d = data.get("target"), data.get("draft")
        if data.get("files_pinned") and t is not None and d is not None and not self.errors:
            # A row is "compatible" when any combination works, and then shows one that does: pin one of those.
            combos = pair_combinations([p])[0].combos
            mine = [c for c in combos if (c.target.tokenizer_class_id, c.draft.tokenizer_class_id) == (
                t.tokenizer_class_id, d.tokenizer_class_id)]  # fmt: skip
            if mine and not mine[0].compatible and any(c.compatible for c in combos):
                self.add_error("draft", f"these two files fail {mine[0].failed_rule}: pin a compatible combination")
        return data


@admin.register(Pair)
class PairAdmin(admin.ModelAdmin):
    list_display = (
        "target",
        "draft",
        "compatible",
        "verdict",
        "failed_rule",
        "size_ratio",
        "best_kind",
        "best_speedup",
    )
    list_filter = ("compatible", "verdict", "files_pinned", "failed_rule", "best_kind")
    search_fields = ("target__source", "draft__source")
    form = PairFilesForm
    raw_id_fields = ("target", "draft")
    readonly_fields = [f.name for f in Pair._meta.fields if f.name not in ("target", "draft", "files_pinned")]
    list_select_related = ("target", "draft")

    def has_add_permission(self, request) -> bool:
        return False  # pairs are computed, never typed in

    def save_model(self, request, obj, form, change) -> None:
        super().save_model(request, obj, form, change)
        # The verdict of the files chosen (pinned) or of the best combination again (unpinned).
        settle([Pair.objects.select_related("target", "draft").get(pk=obj.pk)]).save()
        PairCheckResult.objects.filter(pair=obj).delete()
        bump_generation()


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
    actions = ["move_to_own_base"]

    # Moving re-pairs models and rewrites pairs: staff who may only view models must not run it.
    @admin.action(
        description="Move out of its base model (misgrouped): a base model of its own", permissions=["change"]
    )
    def move_to_own_base(self, request, queryset) -> None:
        moved = move_out(queryset.values_list("pk", flat=True))
        self.message_user(request, f"{len(moved)} model(s) moved to a base model of their own and paired again.")


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
    actions = ["merge_into_oldest"]

    # A newcomer's variant starts a base model of its own (registry.catalog.bases.admitted): staff who judge it to be
    # the same model join it here. Merging re-pairs files and rewrites pairs: it needs the change permission.
    @admin.action(description="Merge into the oldest selected base model (one model)", permissions=["change"])
    def merge_into_oldest(self, request, queryset) -> None:
        kept = merge(queryset.values_list("pk", flat=True))
        if kept is None:
            self.message_user(
                request, "Select two or more base models of one architecture to merge.", level=messages.WARNING
            )
            return
        self.message_user(request, f"Merged into {kept.name}: its files were paired again.")


@admin.register(TokenizerClass)
class TokenizerClassAdmin(admin.ModelAdmin):
    list_display = ("fingerprint", "vocab_type", "n_tokens", "add_bos", "add_eos", "vocab_key")
    search_fields = ("fingerprint", "vocab_key")
    readonly_fields = ("fingerprint", "token_table", "created_at")


@admin.register(BenchmarkRun)
class BenchmarkRunAdmin(admin.ModelAdmin):
    """Runs are written by submission and the workers (runner.runs): staff browse them here, by kind and status."""

    list_display = ("pk", "kind", "status", "pair", "hardware_class", "requested_by", "created_at", "finished_at")
    list_filter = ("kind", "status", "hardware_class")
    list_select_related = ("pair__target", "pair__draft", "requested_by")
    readonly_fields = [f.name for f in BenchmarkRun._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False
