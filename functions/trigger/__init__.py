"""The trigger function: webhooks, schedules and S3 drops start runs."""
