"""The standing hostile suites: the real client against a misbehaving origin, and a
hostile client against the real server. See docs/reliability.md, "Hostile suites"."""
