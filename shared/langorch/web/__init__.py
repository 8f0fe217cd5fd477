"""HTTP surfaces: the one table of HTTP answers (``errors``), webhook responses, approval pages
and emails, link signing."""
