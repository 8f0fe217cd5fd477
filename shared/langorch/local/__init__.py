"""The local stack: the AWS emulator and what it needs to behave like AWS."""
