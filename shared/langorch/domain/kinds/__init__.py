"""Step kinds, the pure half: each kind's settings model, what it reads and writes, its checks.

One module per kind (``llm``, ``decision``, ``memory``, ``transform``, ``http``, ``read_file``,
``approval``, ``wait``, ``loop``, ``subflow``, ``terminate``); :mod:`.registry` lists them by
name. Validation and the compiler look a kind up there, never branch on kind names. Each kind's
executor lives beside it in :mod:`langorch.engine.kinds` (LangGraph stays out of ``domain``).
"""
