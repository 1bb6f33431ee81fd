# A foreign key's own index, dropped where a composite index leads with its column
# (`core.indexes`).

import django.db.models.deletion
from django.db import migrations, models

from core.indexes import drop_own_index


class Migration(migrations.Migration):

    dependencies = [
        ('scorecards', '0009_protocol4'),
    ]

    operations = [
        drop_own_index(
            'membership',
            'workspace',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='memberships', to='scorecards.workspace'),
            table='scorecards_membership',
            index='scorecards_membership_workspace_id_c72c750a',
        ),
        drop_own_index(
            'harnessversion',
            'workspace',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='harnesses', to='scorecards.workspace'),
            table='scorecards_harnessversion',
            index='scorecards_harnessversion_workspace_id_a0281a95',
        ),
        drop_own_index(
            'datasetversion',
            'workspace',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='datasets', to='scorecards.workspace'),
            table='scorecards_datasetversion',
            index='scorecards_datasetversion_workspace_id_61daa0ff',
        ),
        drop_own_index(
            'case',
            'dataset',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='cases', to='scorecards.datasetversion'),
            table='scorecards_case',
            index='scorecards_case_dataset_id_34fe208d',
        ),
        drop_own_index(
            'run',
            'workspace',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='runs', to='scorecards.workspace'),
            table='scorecards_run',
            index='scorecards_run_workspace_id_c232d8c5',
        ),
        drop_own_index(
            'run',
            'harness',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.PROTECT, related_name='runs', to='scorecards.harnessversion'),
            table='scorecards_run',
            index='scorecards_run_harness_id_99ee84ab',
        ),
        drop_own_index(
            'caseresult',
            'run',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='results', to='scorecards.run'),
            table='scorecards_caseresult',
            index='scorecards_caseresult_run_id_a9bf42bd',
        ),
    ]
