"""A plan's graph: ``wiring`` (each step's kind and block, every edge), ``topology`` (entry steps,
reachability, cycles, joins: what validation and the compiler both read) and ``graph`` (the
resolved :class:`~langorch.domain.plan.graph.StepGraph` and the algorithms over it)."""
