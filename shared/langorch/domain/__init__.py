"""Pure models and rules: blocks, workflows, runs, approvals, triggers, errors."""
