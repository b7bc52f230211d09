"""The runner's 0001-0005 in one migration.

The replaced migrations are kept: Django runs this one where none of them ran (a new database: the runner's tables
hold no rows before its 0001) and marks it applied where all of them did; a database part of the way through runs the
rest of them instead. The move of BenchmarkRun and BenchmarkResult to the registry stays as 0003 made it: this app
creates their tables (runner_benchmarkrun, runner_benchmarkresult) and hands them over in state only, and the
registry's 0003, which depends on this migration in place of the runner's 0003, takes them into its state without
touching the tables.

The registry's own migrations are not squashed: its 0008 is a dependency of the team's 0001 and its 0014 depends on
the team's 0003 (0014's data step moves the team's notes), so a squash spanning them would depend on itself through
the team app; and a squash that starts after 0001 would be run, without its data steps, by a database standing at
its start.
"""
import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    replaces = [('runner', '0001_initial'), ('runner', '0002_other_cpu_share'), ('runner', '0003_models_moved_to_registry'), ('runner', '0004_worker_presence'), ('runner', '0005_kept_transcripts_and_costs')]

    initial = True

    dependencies = [
        ('registry', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='BenchmarkRun',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('status', models.CharField(choices=[('queued', 'queued'), ('running', 'running'), ('done', 'done'), ('failed', 'failed'), ('cancelled', 'cancelled')], db_index=True, default='queued', max_length=16)),
                ('params', models.JSONField(default=dict)),
                ('queue', models.CharField(max_length=120)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('started_at', models.DateTimeField(blank=True, null=True)),
                ('finished_at', models.DateTimeField(blank=True, null=True)),
                ('heartbeat_at', models.DateTimeField(blank=True, null=True)),
                ('worker', models.CharField(blank=True, max_length=200)),
                ('progress', models.FloatField(default=0.0)),
                ('progress_message', models.CharField(blank=True, max_length=300)),
                ('cancel_requested', models.BooleanField(default=False)),
                ('log', models.TextField(blank=True)),
                ('error', models.TextField(blank=True)),
                ('hardware', models.JSONField(default=dict)),
                ('hardware_class', models.CharField(blank=True, max_length=64)),
                ('build', models.JSONField(default=dict)),
                ('summary', models.JSONField(default=dict)),
                ('report_md', models.TextField(blank=True)),
                ('server_command', models.TextField(blank=True)),
                ('systemd_unit', models.TextField(blank=True)),
                ('pair', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='registry.pair')),
                ('requested_by', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'ordering': ['-created_at'],
            },
        ),
        migrations.CreateModel(
            name='BenchmarkResult',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('k', models.PositiveIntegerField(help_text='draft tokens per step (--spec-draft-n-max)')),
                ('acceptance', models.FloatField(blank=True, help_text='accepted / drafted, 0–1', null=True)),
                ('speedup', models.FloatField(blank=True, help_text='speculative ÷ plain tokens per second', null=True)),
                ('tokens_per_second', models.FloatField(blank=True, null=True)),
                ('baseline_tokens_per_second', models.FloatField(blank=True, null=True)),
                ('content_type', models.CharField(blank=True, help_text='code, chat, prose, …', max_length=32)),
                ('hardware', models.CharField(blank=True, max_length=200)),
                ('llama_cpp_build', models.CharField(blank=True, max_length=32)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
                ('temperature', models.FloatField(default=0.0)),
                ('p_min', models.FloatField(blank=True, null=True)),
                ('n_predict', models.PositiveIntegerField()),
                ('repeats', models.PositiveIntegerField()),
                ('n_prompts', models.PositiveIntegerField()),
                ('status', models.CharField(max_length=16)),
                ('error', models.TextField(blank=True)),
                ('speculation_ran', models.BooleanField(default=True)),
                ('baseline_min', models.FloatField(blank=True, null=True)),
                ('baseline_max', models.FloatField(blank=True, null=True)),
                ('tps_min', models.FloatField(blank=True, null=True)),
                ('tps_max', models.FloatField(blank=True, null=True)),
                ('drafted', models.PositiveIntegerField(default=0)),
                ('accepted', models.PositiveIntegerField(default=0)),
                ('mean_accepted', models.FloatField(blank=True, null=True)),
                ('identical', models.BooleanField(blank=True, null=True)),
                ('divergences', models.JSONField(default=list)),
                ('pair', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='measured_results', to='registry.pair')),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='results', to='runner.benchmarkrun')),
            ],
            options={
                'ordering': ['content_type', 'temperature', 'k'],
            },
        ),
        migrations.AddIndex(
            model_name='benchmarkrun',
            index=models.Index(fields=['status', 'heartbeat_at'], name='run_status_heartbeat'),
        ),
        migrations.AddIndex(
            model_name='benchmarkresult',
            index=models.Index(fields=['pair', 'content_type'], name='result_pair_type'),
        ),
        migrations.AddField(
            model_name='benchmarkresult',
            name='other_cpu_share',
            field=models.FloatField(blank=True, null=True),
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.DeleteModel(
                    name='BenchmarkResult',
                ),
                migrations.DeleteModel(
                    name='BenchmarkRun',
                ),
            ],
        ),
        migrations.CreateModel(
            name='WorkerPresence',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=200, unique=True)),
                ('queues', models.JSONField(default=list)),
                ('hardware_class', models.CharField(blank=True, max_length=64)),
                ('started_at', models.DateTimeField(auto_now_add=True)),
                ('seen_at', models.DateTimeField()),
            ],
        ),
        migrations.CreateModel(
            name='CostMeasurement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=64, unique=True)),
                ('model_sha256', models.CharField(db_index=True, max_length=64)),
                ('model_name', models.CharField(max_length=255)),
                ('model_size', models.BigIntegerField()),
                ('build', models.CharField(max_length=64)),
                ('hardware_class', models.CharField(db_index=True, max_length=64)),
                ('host', models.CharField(max_length=255)),
                ('threads', models.IntegerField(null=True)),
                ('depth', models.IntegerField()),
                ('data', models.JSONField()),
                ('seconds', models.FloatField(null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
        migrations.CreateModel(
            name='KeptTranscript',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('key', models.CharField(max_length=64, unique=True)),
                ('model_sha256', models.CharField(db_index=True, max_length=64)),
                ('model_name', models.CharField(max_length=255)),
                ('model_size', models.BigIntegerField()),
                ('build', models.CharField(max_length=64)),
                ('hardware_class', models.CharField(db_index=True, max_length=64)),
                ('task', models.CharField(blank=True, max_length=200)),
                ('n_predict', models.IntegerField()),
                ('temperature', models.FloatField(default=0.0)),
                ('data', models.JSONField()),
                ('seconds', models.FloatField(null=True)),
                ('created_at', models.DateTimeField(auto_now_add=True)),
            ],
        ),
    ]
