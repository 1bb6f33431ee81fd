# A foreign key's own index, dropped where a composite index leads with its column
# (`core.indexes`).

import django.db.models.deletion
from django.db import migrations, models

from core.indexes import drop_own_index


class Migration(migrations.Migration):

    dependencies = [
        ('runners', '0007_runner_paused_reason'),
    ]

    operations = [
        drop_own_index(
            'runnerjob',
            'run',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='jobs', to='scorecards.run'),
            table='runners_runnerjob',
            index='runners_runnerjob_run_id_6b253d21',
        ),
        drop_own_index(
            'jobattempt',
            'job',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='attempt_set', to='runners.runnerjob'),
            table='runners_jobattempt',
            index='runners_jobattempt_job_id_77480047',
        ),
        drop_own_index(
            'joblogline',
            'run',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='log_lines', to='scorecards.run'),
            table='runners_joblogline',
            index='runners_joblogline_run_id_bb6c5560',
        ),
    ]
