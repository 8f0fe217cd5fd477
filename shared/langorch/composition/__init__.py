"""The composition root: settings in, wired adapters out (``container``), and the one container
each Lambda sandbox builds on first use (``bootstrap``). The only package that knows which
implementation stands behind each port."""
