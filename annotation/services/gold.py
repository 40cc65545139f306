"""Gold tasks as other apps call them (analytics' drill-down page makes the selected
responses gold): a re-export of annotation.campaigns.services."""

from annotation.campaigns.services import gold_task_set as gold_task_set
