"""The langorch CDK app: one stack that composes one construct per capability."""
