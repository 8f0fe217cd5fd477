"""Approval use-cases: request one, show its page, decide it once, vote, remind, escalate, expire.

``requests`` (what the state machine's ``AwaitApproval`` task invokes), ``decisions`` (the page
use-cases: view and decide) and ``commands`` (what they are asked), ``checks`` (the signed link,
view token, code and edits a page request passes), ``votes`` (policies at work: votes,
delegation, timers), ``driver`` (the lifecycle table driven against the store), ``keys`` and
``rotation`` (the link-signing keys) and ``ports`` (what they need, as Protocols).
"""
