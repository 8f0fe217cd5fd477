"""langorch: run AI workflows on AWS as an event-driven serverless pipeline."""

__version__ = "0.1.0"
