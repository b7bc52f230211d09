"""The team app's 0001-0003 in one migration; 0004 stays on its own, since it depends on the registry's 0020 and the
registry's 0014 depends on 0003 (a squashed migration takes on every dependency of those it replaces).

The replaced migrations are kept: Django runs this one where none of them ran and marks it applied where all of
them did, and a database part of the way through runs the rest of them instead (their data steps import no product
code: the helpers they need are copied into them). Their data steps change rows that a fresh database does not
have, so they are elided here (``elidable=True`` there).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('team', '0001_notes_deployments_telemetry'), ('team', '0002_scrape_errors_without_url'), ('team', '0003_scrape_queue_and_errors_trimmed')]

    dependencies = [
        ('registry', '0008_provenance_and_verdict_changes'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='Deployment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('origin_installation', models.CharField(blank=True, default='', max_length=64)),
                ('origin_id', models.BigIntegerField(blank=True, null=True)),
                ('origin_author', models.CharField(blank=True, default='', max_length=150)),
                ('imported_at', models.DateTimeField(blank=True, null=True)),
                ('method', models.CharField(max_length=32)),
                ('k', models.PositiveIntegerField(blank=True, null=True)),
                ('flags', models.CharField(blank=True, max_length=1000)),
                ('command', models.TextField()),
                ('host', models.CharField(blank=True, max_length=255)),
                ('url', models.URLField(blank=True, max_length=500)),
                ('author_name', models.CharField(max_length=150)),
                ('deployed_at', models.DateTimeField()),
                ('retired_at', models.DateTimeField(blank=True, null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('created_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('draft', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.PROTECT, related_name='deployments_as_draft', to='registry.gguffile')),
                ('pair', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='deployments', to='registry.pair')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='deployments', to='registry.benchmarkrun')),
                ('target', models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name='deployments_as_target', to='registry.gguffile')),
            ],
            options={
                'ordering': ['-deployed_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='Note',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('origin_installation', models.CharField(blank=True, default='', max_length=64)),
                ('origin_id', models.BigIntegerField(blank=True, null=True)),
                ('origin_author', models.CharField(blank=True, default='', max_length=150)),
                ('imported_at', models.DateTimeField(blank=True, null=True)),
                ('body', models.TextField()),
                ('author_name', models.CharField(max_length=150)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('updated_at', models.DateTimeField(auto_now=True)),
                ('hidden', models.BooleanField(default=False)),
                ('hidden_at', models.DateTimeField(blank=True, null=True)),
                ('author', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('file', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notes', to='registry.gguffile')),
                ('hidden_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
                ('model', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notes', to='registry.model')),
                ('pair', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notes', to='registry.pair')),
                ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='notes', to='registry.benchmarkrun')),
            ],
            options={
                'ordering': ['created_at', 'pk'],
            },
        ),
        migrations.CreateModel(
            name='NoteVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('body', models.TextField()),
                ('author_name', models.CharField(max_length=150)),
                ('written_at', models.DateTimeField()),
                ('replaced_at', models.DateTimeField(auto_now_add=True)),
                ('note', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='team.note')),
                ('replaced_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-replaced_at', '-pk'],
            },
        ),
        migrations.CreateModel(
            name='TelemetrySample',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('scraped_at', models.DateTimeField()),
                ('ok', models.BooleanField()),
                ('error', models.CharField(blank=True, max_length=500)),
                ('reset', models.BooleanField(default=False)),
                ('draft_tokens_total', models.FloatField(blank=True, null=True)),
                ('accepted_tokens_total', models.FloatField(blank=True, null=True)),
                ('drafts_total', models.FloatField(blank=True, null=True)),
                ('tokens_predicted_total', models.FloatField(blank=True, null=True)),
                ('tokens_predicted_seconds_total', models.FloatField(blank=True, null=True)),
                ('draft_tokens', models.FloatField(blank=True, null=True)),
                ('accepted_tokens', models.FloatField(blank=True, null=True)),
                ('drafts', models.FloatField(blank=True, null=True)),
                ('tokens_predicted', models.FloatField(blank=True, null=True)),
                ('tokens_predicted_seconds', models.FloatField(blank=True, null=True)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='samples', to='team.deployment')),
            ],
            options={
                'ordering': ['scraped_at', 'pk'],
            },
        ),
        migrations.AddIndex(
            model_name='deployment',
            index=models.Index(fields=['retired_at', 'url'], name='deployment_active_url'),
        ),
        migrations.AddConstraint(
            model_name='deployment',
            constraint=models.UniqueConstraint(condition=models.Q(('origin_id__isnull', False)), fields=('origin_installation', 'origin_id'), name='deployment_origin_unique'),
        ),
        migrations.AddConstraint(
            model_name='note',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('file__isnull', True), ('model__isnull', False), ('pair__isnull', True), ('run__isnull', True)), models.Q(('file__isnull', False), ('model__isnull', True), ('pair__isnull', True), ('run__isnull', True)), models.Q(('file__isnull', True), ('model__isnull', True), ('pair__isnull', False), ('run__isnull', True)), models.Q(('file__isnull', True), ('model__isnull', True), ('pair__isnull', True), ('run__isnull', False)), _connector='OR'), name='note_on_exactly_one_thing'),
        ),
        migrations.AddConstraint(
            model_name='note',
            constraint=models.UniqueConstraint(condition=models.Q(('origin_id__isnull', False)), fields=('origin_installation', 'origin_id'), name='note_origin_unique'),
        ),
        migrations.AddIndex(
            model_name='telemetrysample',
            index=models.Index(fields=['deployment', 'scraped_at'], name='sample_deployment_time'),
        ),
        migrations.AddField(
            model_name='deployment',
            name='scrape_started_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='deployment',
            name='scrape_queued_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
