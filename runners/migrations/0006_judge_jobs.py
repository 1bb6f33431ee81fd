# Judge jobs (protocol 3): a job is a case or a judge of one.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runners', '0005_runner_features'),
    ]

    operations = [
        migrations.AddField(
            model_name='runnerjob',
            name='kind',
            field=models.CharField(choices=[('case', 'Case'), ('judge', 'Judge')], db_default='case', default='case', max_length=8),
        ),
    ]
