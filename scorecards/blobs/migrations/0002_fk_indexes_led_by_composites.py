# A foreign key's own index, dropped where a composite index leads with its column
# (`core.indexes`).

import django.db.models.deletion
from django.db import migrations, models

from core.indexes import drop_own_index


class Migration(migrations.Migration):

    dependencies = [
        ('blobs', '0001_initial'),
    ]

    operations = [
        drop_own_index(
            'blob',
            'workspace',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='blobs', to='scorecards.workspace'),
            table='scorecards_blob',
            index='scorecards_blob_workspace_id_f3f76475',
        ),
        drop_own_index(
            'blobupload',
            'workspace',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='scorecards.workspace'),
            table='scorecards_blobupload',
            index='scorecards_blobupload_workspace_id_4ae854c4',
        ),
        drop_own_index(
            'artifact',
            'result',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='artifacts', to='scorecards.caseresult'),
            table='scorecards_artifact',
            index='scorecards_artifact_result_id_3e15a11c',
        ),
    ]
