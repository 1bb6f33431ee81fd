# Judgements: one row per judge vote on a result, who judged it, and the judging verdict.

import django.db.models.deletion
import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runners', '0006_judge_jobs'),
        ('scorecards', '0004_traces_and_screens'),
    ]

    operations = [
        migrations.AddField(
            model_name='caseresult',
            name='judged_by',
            field=models.JSONField(blank=True, db_default={}, default=dict),
        ),
        migrations.AlterField(
            model_name='caseresult',
            name='verdict',
            field=models.CharField(choices=[('pass', 'Pass'), ('fail', 'Fail'), ('error', 'Error'), ('judging', 'Judging')], max_length=10),
        ),
        migrations.CreateModel(
            name='Judgement',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('vote', models.PositiveSmallIntegerField()),
                ('tries', models.PositiveSmallIntegerField(default=1)),
                ('spec', models.JSONField(blank=True, default=dict)),
                ('state', models.CharField(choices=[('due', 'Due'), ('readable', 'Readable'), ('unreadable', 'Unreadable'), ('failed', 'Failed')], default='due', max_length=12)),
                ('passed', models.BooleanField(blank=True, null=True)),
                ('score', models.FloatField(blank=True, null=True)),
                ('reason', models.CharField(blank=True, max_length=1000)),
                ('raw_tail', models.TextField(blank=True)),
                ('judged_by', models.JSONField(blank=True, default=dict)),
                ('usage', models.JSONField(blank=True, null=True)),
                ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                ('settled_at', models.DateTimeField(blank=True, null=True)),
                ('job', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='runners.runnerjob')),
                ('result', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='judgements', to='scorecards.caseresult')),
            ],
            options={
                'ordering': ['result_id', 'vote'],
                'constraints': [models.UniqueConstraint(fields=('result', 'vote'), name='judgement_unique_vote')],
            },
        ),
    ]
