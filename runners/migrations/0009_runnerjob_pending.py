# A run's pending jobs in order: its admission, and whether any is left, read the run by
# status whatever the planner's statistics say.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runners', '0008_fk_indexes_led_by_composites'),
    ]

    operations = [
        migrations.AddIndex(
            model_name='runnerjob',
            index=models.Index(
                condition=models.Q(('status', 'pending')),
                fields=['run', 'seq'],
                name='runnerjob_pending',
            ),
        ),
    ]
