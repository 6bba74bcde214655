"""Exceptions raised by nhbench.

Every exception nhbench raises on purpose derives from `NHBenchError`, so a caller can catch
them all with one clause, and each one carries a message that fits on one line (the CLI
prints it as is, after ``nhbench: error:``).

Hierarchy::

    NHBenchError
    ├── OptionsError            invalid options (also a ValueError); `.option` names the option
    │   ├── RunRefusedError     a run the UI's caps or target allow-list refuse (``nhbench
    │   │                       ui``, Fortio's REST API: HTTP 403, nothing sent)
    │   └── K8sError            a --watch-pod or --k8s-service that kubectl and the kubelet's
    │                           CPU manager state cannot resolve (nothing was sent)
    ├── CoreUnavailableError    the compiled extension nhbench._core cannot be imported
    │                           (also an ImportError)
    ├── RunError                the benchmark could not be carried out
    │   ├── ResolveError        the target host name did not resolve
    │   └── CoreError           the C core rejected the configuration or failed to start
    │       └── ConfigRejectedError  the C core rejected the configuration (bad input:
    │                           also an OptionsError, so the CLI exits 2)
    ├── ServerError             the test server could not be started or did not answer
    ├── HostError               a host (local or over SSH) could not be used
    │   ├── UnreachableError    the SSH host (or jump host) did not answer or refused TCP
    │   ├── HostKeyError        the host key is unknown or changed; nothing was sent
    │   ├── AuthenticationError the SSH server refused every offered credential
    │   └── CommandError        a command on the host failed in a way the caller cannot skip
    ├── CampaignError           a campaign directory is unusable (corrupt manifest, resume
    │                           with different options, directory not empty)
    ├── CalibrationError        ``nhbench calibrate`` could not measure the host, or a saved
    │                           calibration cannot be read
    ├── ResultFileError         a result file cannot be loaded (`nhbench.load_result`: missing,
    │                           not JSON, not a format nhbench reads, invalid)
    ├── SyncError               a peer's result listing could not be fetched or read
    │                           (`nhbench.browse.sync_results`, ``nhbench browse --sync``)
    └── SloError                a service-level objective was not met (`assert_slo`, the
                                pytest plugin); also an AssertionError. Its message is the
                                verdict table: one line of summary, then one row per rule

    OutputError                 (an OSError, defined in nhbench._io) an output file (report,
                                JSON result) could not be written; one line naming the path
    InputError                  (a ValueError, defined in nhbench._input) a file the user named
                                could not be read: missing, not a regular file, over its kind's
                                size limit; one line naming the option and the path
    HistogramDecodeError        (a ValueError, defined in nhbench._histogram) an encoded
                                HdrHistogram nhbench will not decode (a header outside its
                                bounds, a payload larger than the header allows)

A run that *did* happen but went badly (connection refused, error responses) is not an
exception: it returns a `Result` whose failure predicates fired, because the counters and
latencies collected until then are still worth reporting.
"""

from __future__ import annotations

__all__ = [
    "NHBenchError",
    "OptionsError",
    "RunRefusedError",
    "K8sError",
    "CoreUnavailableError",
    "RunError",
    "ResolveError",
    "CoreError",
    "ConfigRejectedError",
    "ServerError",
    "HostError",
    "UnreachableError",
    "HostKeyError",
    "AuthenticationError",
    "CommandError",
    "CalibrationError",
    "CampaignError",
    "ResultFileError",
    "SloError",
    "SyncError",
]


class NHBenchError(Exception):
    """Base class of every exception nhbench raises on purpose."""


class OptionsError(NHBenchError, ValueError):
    """An option has an invalid value.

    It is a ValueError too, so code that validates input generically still catches it.
    `option` is the name of the offending option (Python spelling), or None when the problem
    concerns several options at once.
    """

    def __init__(self, message: str, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class RunRefusedError(OptionsError):
    """A run started from the browser UI or Fortio's REST API that its limits (rate,
    connections, duration, runs at once) or its target allow-list refuse; nothing was sent."""


class K8sError(OptionsError):
    """A --watch-pod or --k8s-service that cannot be resolved on the target host (no such
    pod or container, no CPUs in the CPU manager state, no NodePort, kubectl failing);
    `option` names the flag. Raised before a sweep writes or sends anything."""


class CoreUnavailableError(NHBenchError, ImportError):
    """The compiled extension ``nhbench._core`` is missing or does not load."""


class RunError(NHBenchError):
    """The benchmark could not be carried out at all."""


class ResolveError(RunError):
    """The host name in the URI did not resolve to an address of the wanted family."""


class CoreError(RunError):
    """The C core refused the configuration or could not start its workers.

    `code` is the core's error code (negative: an ``NHB_E*`` code of csrc/nhb.h, or a
    negated errno from libuv) and `name` its name (``"EMFILE"``, ``"NHB_ETHREAD"``...);
    both are None when the failure did not come with a code from the core (the run's
    watchdog, or a configuration the core rejected as invalid).
    """

    def __init__(self, message: str, code: int | None = None, name: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.name = name


class ConfigRejectedError(CoreError, OptionsError):
    """The C core refused the configuration (``ClientRun`` raised ValueError, e.g. a CA file
    or a TLS group OpenSSL rejects). The input was invalid, so it is an `OptionsError` too."""


class ServerError(NHBenchError):
    """The test server could not be started, or it stopped answering."""


class HostError(NHBenchError):
    """A host that a sweep runs commands on (local or over SSH) could not be used."""


class UnreachableError(HostError):
    """The SSH host or its jump host could not be reached (DNS, refused, timeout)."""


class HostKeyError(HostError):
    """The SSH host key is not in known_hosts, or differs from the one recorded there.

    Nothing (no credential, no command) has been sent to the host when this is raised.
    """


class AuthenticationError(HostError):
    """The SSH server refused every credential offered (key, agent, password)."""


class CommandError(HostError):
    """A command on a host failed and the caller cannot carry on without it."""


class CampaignError(NHBenchError):
    """A campaign directory cannot be created, resumed or read."""


class CalibrationError(NHBenchError):
    """A calibration could not be made or read (the message says why)."""


class ResultFileError(NHBenchError):
    """A result file cannot be loaded (`nhbench.load_result`). `path` is the file, and the
    message is one line naming it and the reason."""

    def __init__(self, message: str, path: str) -> None:
        super().__init__(message)
        self.path = path


class SyncError(NHBenchError):
    """A peer's result listing (an ``index.tsv`` or a bucket listing) could not be fetched
    or read, so a sync (`nhbench.browse.sync_results`) did nothing. One line naming the
    listing and the reason; a single file that fails is counted, not raised."""


class SloError(NHBenchError, AssertionError):
    """A run did not meet its service-level objectives (`nhbench.assert_slo`).

    It is an AssertionError too, so pytest reports it as a failed assertion, not an error.
    Unlike the other exceptions its message has several lines: a one-line summary, then the
    verdict table (each rule, measured value, threshold) and a compact percentile table.
    `outcome` is the `nhbench._slo.SloOutcome` (None when raised without one).
    """

    def __init__(self, message: str, outcome: object = None) -> None:
        super().__init__(message)
        self.outcome = outcome
