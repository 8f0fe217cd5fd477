"""The Lambda handlers: one thin package per function (trigger, run_segment, request_approval,
approval_callback). Each applies Powertools, parses its event, calls one use-case, maps the result.
"""
