"""Step kinds, the pure half: each kind's settings model, what it reads and writes, its checks.

One module per kind (``llm``, ``decision``, ``memory``, ``transform``, ``http``, ``read_file``,
``approval``, ``wait``, ``loop``, ``subflow``, ``terminate``); :mod:`.registry` lists them by
name. Validation and the compiler look a kind up there, never branch on kind names. Each kind's
executor lives beside it in :mod:`langorch.engine.kinds` (LangGraph stays out of ``domain``, and
validation runs without it).

Adding a kind touches no other module::

    class Shout(StepKind):                       # domain half: pure
        name = "shout"
        settings_model = ShoutSettings           # steps write `settings: {...}`
        settings_required = True
        def reads(self, step, block, path): ...  # keys it reads, for the data-flow check
        def outputs(self, step_id, step, block, lookup): ...   # keys it writes

    async def run_shout(spec, state, ctx, attempt) -> Outcome: ...   # engine half

    langorch.engine.kinds.registry.register(Shout(), run_shout)

A built-in kind is the same, with its module listed in ``registry.BUILTIN_MODULES`` and its
settings in a field of its own on ``PlanStep`` (the stored format since seed 000); those
settings models sit in :mod:`.settings`, below ``definitions``, so that the package has no
import cycle (definitions needs the models; a kind's checks need ``PlanStep``).
``tests/unit/test_new_kind.py`` is the worked example.
"""
