"""Helpers for the tests, not tests: fake core results, scripted and nginx origins, raw
HTTP/2 frames, socket reads, polling to a deadline, the nginx suites' skip marker and count
check, the atomic writers' failed-rename check and the `sshd` fixture. Imported as
``support.X`` (pytest puts tests/ on sys.path because tests/ has no __init__.py)."""
