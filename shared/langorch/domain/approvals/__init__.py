"""Approvals, the pure rules: the record of a parked human decision and everything decided about it.

``record`` (the approval, signed links, decide-once), ``policy`` (quorum, reminders, escalation,
delegation, separation of duties, as stored), ``votes`` (counting votes against a policy and the
timers a pending approval waits on), ``lifecycle`` (states, events, allowed transitions),
``edits`` (typed approver edits), ``codes`` (one-time codes), ``views`` (view tokens against
form-submitting scanners), ``audit`` (the append-only trail) and ``outcomes`` (what the page
use-cases answer). No I/O, no clock of their own.
"""
