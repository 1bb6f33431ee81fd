# A foreign key's own index, dropped where a composite index leads with its column
# (`core.indexes`).

import django.db.models.deletion
from django.db import migrations, models

from core.indexes import drop_own_index


class Migration(migrations.Migration):

    dependencies = [
        ('judging', '0001_initial'),
    ]

    operations = [
        drop_own_index(
            'judgement',
            'result',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='judgements', to='scorecards.caseresult'),
            table='scorecards_judgement',
            index='scorecards_judgement_result_id_5cfea90f',
        ),
    ]
