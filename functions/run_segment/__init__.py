"""The run_segment Lambda (see ``handler``)."""
