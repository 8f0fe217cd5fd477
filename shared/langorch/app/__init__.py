"""Use-cases: functions of (command, dependencies)."""
