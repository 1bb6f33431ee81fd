"""Text on its way out: cut to a budget of UTF-8 bytes (`utf8`), and redacted by the member's
patterns before it leaves the machine (`redact`)."""
