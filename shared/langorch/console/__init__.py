"""The run console: ``langorch console`` serves runs, graphs, timelines, approvals and
workflows as server-rendered pages on 127.0.0.1 (see :mod:`langorch.console.server`)."""
