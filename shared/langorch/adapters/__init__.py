"""The only code that imports boto3. Each adapter takes its client; ``ClientError`` becomes a
named domain error here and nowhere else."""
