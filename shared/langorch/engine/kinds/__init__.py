"""Step kinds, the executing half: one module per kind, each beside its pure spec in
:mod:`langorch.domain.kinds`. :mod:`.registry` maps a kind's name to its executor; the generic
node (:mod:`langorch.engine.executors`) looks the executor up there."""
