# A foreign key's own index, dropped where a composite index leads with its column
# (`core.indexes`).

import django.db.models.deletion
from django.db import migrations, models

from core.indexes import drop_own_index


class Migration(migrations.Migration):

    dependencies = [
        ('review', '0001_review'),
    ]

    operations = [
        drop_own_index(
            'review',
            'result',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='reviews', to='scorecards.caseresult'),
            table='review_review',
            index='review_review_result_id_5c589d3b',
        ),
    ]
