"""nhbench in pytest: the plugin (`nhbench.testing._plugin`, registered with pytest by the
``pytest11`` entry point, so installing nhbench is enough) and its documentation home.

Fixtures ``nhbench_server`` / ``nhbench_server_session`` (started `TestServer` factories) and
``nhbench_run`` (``nhbench.run`` that records each result against the test), the marker
``@pytest.mark.nhbench_slo("p99<5ms", ...)``, and the options ``--nhbench-save``,
``--nhbench-duration-scale``, ``--nhbench-compare`` and ``--nhbench-compare-fail``. See
docs/pytest.md.

Nothing is imported here: pytest loads the plugin in every session of an environment where
nhbench is installed, and a suite that does not use it must not pay for it.
"""

from __future__ import annotations

__all__: list[str] = []
