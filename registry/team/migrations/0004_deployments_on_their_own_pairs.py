"""Deployments belong to their own models' pairs: a run that measured other models is no longer one a
deployment follows, and a draftless deployment that took such a run's pair sits on the target's own pair (or none,
until its first soak makes it). Soaks already recorded stay with the runs that made them."""

from django.db import migrations


def correct(apps, schema_editor) -> None:
    Deployment = apps.get_model("team", "Deployment")
    Pair = apps.get_model("registry", "Pair")
    for d in Deployment.objects.select_related("target__model", "draft__model", "run__pair", "pair").iterator():
        target_base = d.target.model.base_id
        draft_base = (d.draft or d.target).model.base_id
        fields = {}
        if d.run_id is not None:
            run = d.run
            t = run.target_file_id and apps.get_model("registry", "GGUFFile").objects.get(pk=run.target_file_id)
            dr = run.draft_file_id and apps.get_model("registry", "GGUFFile").objects.get(pk=run.draft_file_id)
            same_target = (t.model.base_id if t else run.pair.target_base_id) == target_base
            same_draft = d.draft_id is None or (dr.model.base_id if dr else run.pair.draft_base_id) == draft_base
            if not (same_target and same_draft):
                fields["run"] = None
        if d.pair_id is not None and (d.pair.target_base_id, d.pair.draft_base_id) != (target_base, draft_base):
            own = Pair.objects.filter(target_base_id=target_base, draft_base_id=draft_base).first()
            fields["pair"] = own
        if fields:
            Deployment.objects.filter(pk=d.pk).update(**fields)


class Migration(migrations.Migration):
    dependencies = [("team", "0003_scrape_queue_and_errors_trimmed"), ("registry", "0020_per_class_verdicts")]

    operations = [migrations.RunPython(correct, migrations.RunPython.noop, elidable=True)]
