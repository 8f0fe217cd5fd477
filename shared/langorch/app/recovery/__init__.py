"""Getting runs going again: ``redrive`` (one run, from its checkpoint or a step), ``bulk`` (many,
at a bounded rate), ``forks`` (a new run from another's checkpoint, with edited state),
``restart`` (the local stack gives in-flight runs new executions) and ``reconcile`` (no run stays
open after its execution ended).
"""
