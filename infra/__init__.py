"""The langorch CDK app: one stack that composes one construct per capability."""

import os

# jsii relays Node's end-of-life banner as Python byte strings, a dozen lines of b'!!…' before
# anything else; `python -m infra.app` says it in one line of its own instead (infra.app.main).
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "16,18,20")
