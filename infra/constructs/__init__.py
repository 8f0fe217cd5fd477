"""One construct per capability; :class:`infra.stack.LangorchStack` only composes them."""
