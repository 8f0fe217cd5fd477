"""DynamoDB adapters: definitions, runs, checkpointer, memory. Each takes its boto3 client."""
