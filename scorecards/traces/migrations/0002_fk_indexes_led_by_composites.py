# A foreign key's own index, dropped where a composite index leads with its column
# (`core.indexes`).

import django.db.models.deletion
from django.db import migrations, models

from core.indexes import drop_own_index


class Migration(migrations.Migration):

    dependencies = [
        ('traces', '0001_initial'),
    ]

    operations = [
        drop_own_index(
            'traceevent',
            'attempt',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runners.jobattempt'),
            table='scorecards_traceevent',
            index='scorecards_traceevent_attempt_id_b887e3b6',
        ),
        drop_own_index(
            'screenframe',
            'attempt',
            models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runners.jobattempt'),
            table='scorecards_screenframe',
            index='scorecards_screenframe_attempt_id_281aaa4a',
        ),
    ]
