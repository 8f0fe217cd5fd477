"""HTTP surfaces: webhook responses, approval pages and emails, link signing."""
