"""What several test suites share: event builders, stack starters, loopback servers, the lock."""
