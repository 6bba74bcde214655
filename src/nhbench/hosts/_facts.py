"""Collect `MachineFacts` from a `Host`.

One shell script prints every raw input in marked sections (one round trip over SSH); a
second, tiny one runs ``ethtool -i`` once the interface that carries the target address is
known. Each section is turned into facts by a pure ``parse_*`` function, so parsing is
tested on recorded output of many kinds of machines without running anything.

Nothing here raises because a fact cannot be read: the fact stays None and
``unknown[field]`` says why ("no cpufreq in sysfs (virtual machine?)", "ethtool not
installed"). Only a host that cannot run commands at all raises (HostError, from the host).
"""

from __future__ import annotations

import ipaddress
import json
import re
import shlex
import socket
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..options import parse_cpu_list
from ._facts_model import MachineFacts, NicFacts
from ._host import Host

__all__ = [
    "FACTS_SCRIPT",
    "Parsed",
    "collect_facts",
    "facts_script",
    "group_counts",
    "nic_interface",
    "parse_cpu_cores",
    "parse_cpufreq_listing",
    "parse_ethtool",
    "parse_facts_output",
    "parse_ip_addr_show",
    "parse_ip_route_get",
    "parse_irqbalance",
    "parse_lsb_release",
    "parse_lscpu",
    "parse_net_drivers",
    "parse_nic",
    "parse_os_release",
    "parse_rdmsr_uncore",
    "parse_sections",
    "parse_smt",
    "parse_turbo",
    "parse_uname",
    "parse_uncore_sysfs",
]

_MARK = "@@nhbench-section "

# Tools the script looks for; the "tools" section lists those found.
_TOOLS = ("lscpu", "lsb_release", "ip", "ethtool", "rdmsr", "systemctl", "pgrep", "irqbalance")

_CPU = "/sys/devices/system/cpu"

# The script. Every command's stderr is discarded: what matters is whether a section has
# output, and the reasons for missing output are derived from the "tools" section and the
# other sections (a missing sysfs file gives an empty section). LC_ALL=C keeps lscpu's
# numbers and labels in one format; the sbin directories are on PATH because non-root
# users on Debian do not have them, and ip, ethtool and rdmsr live there.
FACTS_SCRIPT = rf"""
PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"; export PATH; LC_ALL=C; export LC_ALL
s() {{ printf '\n{_MARK}%s\n' "$1"; }}
s tools; for t in {" ".join(_TOOLS)}; do command -v "$t" >/dev/null 2>&1 && echo "$t"; done
s uid; id -u
s os-release; cat /etc/os-release 2>/dev/null
s lsb_release; [ -r /etc/os-release ] || lsb_release -ds 2>/dev/null
s uname; uname -n; uname -r; uname -m
s lscpu; lscpu -J 2>/dev/null || lscpu 2>/dev/null
s thread_siblings; grep -H . {_CPU}/cpu[0-9]*/topology/thread_siblings_list 2>/dev/null
s lscpu_cores; lscpu -p=CPU,CORE,SOCKET 2>/dev/null
s smt; cat {_CPU}/smt/active 2>/dev/null
s no_turbo; cat {_CPU}/intel_pstate/no_turbo 2>/dev/null
s boost; cat {_CPU}/cpufreq/boost 2>/dev/null
s cpufreq_dirs; ls -d {_CPU}/cpu[0-9]*/cpufreq 2>/dev/null | wc -l
s governors; grep -H . {_CPU}/cpu[0-9]*/cpufreq/scaling_governor 2>/dev/null
s min_freq; grep -H . {_CPU}/cpu[0-9]*/cpufreq/scaling_min_freq 2>/dev/null
s max_freq; grep -H . {_CPU}/cpu[0-9]*/cpufreq/scaling_max_freq 2>/dev/null
s uncore; grep -H . {_CPU}/intel_uncore_frequency/*/min_freq_khz {_CPU}/intel_uncore_frequency/*/max_freq_khz 2>/dev/null
s rdmsr; if [ ! -d {_CPU}/intel_uncore_frequency ] && [ "$(id -u)" = 0 ] && command -v rdmsr >/dev/null 2>&1; then rdmsr -p 0 0x620 2>&1; echo "exit $?"; fi
s irqbalance_systemctl; systemctl is-active irqbalance 2>/dev/null
s irqbalance_pgrep; pgrep -x irqbalance >/dev/null 2>&1; echo "exit $?"
s net_drivers; for i in /sys/class/net/*; do [ -e "$i" ] || continue; d=$(readlink "$i/device/driver" 2>/dev/null); d=${{d##*/}}; v=; [ -n "$d" ] && v=$(cat "/sys/module/$d/version" 2>/dev/null); echo "${{i##*/}} ${{d:--}} ${{v:--}}"; done
"""  # noqa: E501 - one shell command per fact line, as the parser reads them


def facts_script(target_address: str | None = None) -> str:
    """The facts script, plus the route and address lookups for `target_address` (an IP
    address; it is quoted)."""
    if target_address is None:
        return FACTS_SCRIPT
    address = shlex.quote(target_address)
    return FACTS_SCRIPT + (
        f"s route; ip -j route get {address} 2>/dev/null || ip route get {address} 2>/dev/null\n"
        f"s addr; ip -j addr show to {address} 2>/dev/null || ip -o addr show to {address} 2>/dev/null\n"
    )


@dataclass
class Parsed:
    """What one parse function found: `values` maps MachineFacts field names to values,
    `unknown` maps field names to the reason they could not be read."""

    values: dict[str, Any] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)

    def merge(self, other: Parsed) -> Parsed:
        for name, value in other.values.items():
            self.values[name] = value
            self.unknown.pop(name, None)
        for name, reason in other.unknown.items():
            if self.values.get(name) is None:
                self.unknown.setdefault(name, reason)
        return self


# --------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------


def parse_sections(output: str) -> dict[str, str]:
    """Split the script's output into {section name: text}. A section that printed
    nothing maps to an empty string; a section the script never reached is absent."""
    sections: dict[str, str] = {}
    name: str | None = None
    lines: list[str] = []
    for line in output.splitlines():
        if line.startswith(_MARK):
            if name is not None:
                sections[name] = "\n".join(lines).strip("\n")
            name, lines = line[len(_MARK):].strip(), []
        elif name is not None:
            lines.append(line)
    if name is not None:
        sections[name] = "\n".join(lines).strip("\n")
    return sections


# --------------------------------------------------------------------------------------
# OS and kernel
# --------------------------------------------------------------------------------------


def parse_os_release(text: str) -> str | None:
    """PRETTY_NAME from /etc/os-release (or NAME VERSION when it has none)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, raw = line.partition("=")
        if not sep or not key.strip() or key.strip().startswith("#"):
            continue
        try:
            parts = shlex.split(raw, comments=False)
        except ValueError:
            parts = [raw.strip("'\"")]
        values[key.strip()] = " ".join(parts)
    if values.get("PRETTY_NAME"):
        return values["PRETTY_NAME"]
    name = " ".join(v for v in (values.get("NAME"), values.get("VERSION")) if v)
    return name or None


def parse_lsb_release(text: str) -> str | None:
    """The description printed by ``lsb_release -ds``."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line.strip().strip('"') or None


def parse_uname(text: str) -> Parsed:
    """Three lines: ``uname -n``, ``uname -r``, ``uname -m``."""
    lines = [line.strip() for line in text.splitlines()]
    result = Parsed()
    for index, name in enumerate(("hostname", "kernel", "architecture")):
        if index < len(lines) and lines[index]:
            result.values[name] = lines[index]
        else:
            result.unknown[name] = "uname printed nothing"
    return result


# --------------------------------------------------------------------------------------
# CPU
# --------------------------------------------------------------------------------------


def _lscpu_fields(text: str) -> dict[str, str]:
    """{label without colon: value} from ``lscpu -J`` (flat, or nested as in util-linux
    2.37 and later) or from plain ``lscpu``. The first occurrence of a label wins."""
    fields: dict[str, str] = {}
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            document = json.loads(stripped)
        except ValueError:
            document = None
        if isinstance(document, dict):

            def walk(entries: Iterable[Any]) -> None:
                for entry in entries:
                    if not isinstance(entry, dict):
                        continue
                    label = str(entry.get("field", "")).strip().rstrip(":").strip()
                    data = entry.get("data")
                    if label and data is not None:
                        fields.setdefault(label, str(data).strip())
                    walk(entry.get("children") or [])

            walk(document.get("lscpu") or [])
            return fields
    for line in text.splitlines():
        label, sep, value = line.partition(":")
        if sep:
            fields.setdefault(label.strip(), value.strip())
    return fields


def _count_cpu_list(text: str) -> int | None:
    """Number of CPUs in a list like ``0-71,144-215`` (None when it is not one)."""
    try:
        return len(parse_cpu_list(text.strip().strip(",")))
    except ValueError:
        return None


def _as_int(value: str | None) -> int | None:
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


def parse_lscpu(text: str) -> Parsed:
    """CPU model, online CPUs, sockets, cores per socket, threads per core, NUMA nodes,
    stepping and architecture from ``lscpu -J`` or ``lscpu``. Also ``vendor`` (used to
    explain a missing uncore frequency; not a MachineFacts field)."""
    result = Parsed()
    fields = _lscpu_fields(text)
    if not fields:
        reason = "lscpu printed nothing it could parse" if text.strip() else "lscpu printed nothing"
        for name in _LSCPU_FACTS:
            result.unknown[name] = reason
        return result

    def put(name: str, value: Any, label: str) -> None:
        if value is None or value == "":
            shown = fields.get(label)
            result.unknown[name] = (
                f"lscpu reports {label} as {shown!r}" if shown else f"lscpu does not report {label}"
            )
        else:
            result.values[name] = value

    put("cpu_model", fields.get("Model name"), "Model name")
    online = fields.get("On-line CPU(s) list")
    cpus = _count_cpu_list(online) if online else _as_int(fields.get("CPU(s)"))
    put("cpus", cpus, "On-line CPU(s) list")
    put("sockets", _as_int(fields.get("Socket(s)")), "Socket(s)")
    # Recent util-linux reports ARM cores per cluster rather than per socket.
    cores_label = "Core(s) per socket" if "Core(s) per socket" in fields else "Core(s) per cluster"
    put("cores_per_socket", _as_int(fields.get(cores_label)), cores_label)
    put("threads_per_core", _as_int(fields.get("Thread(s) per core")), "Thread(s) per core")
    put("numa_nodes", _as_int(fields.get("NUMA node(s)")), "NUMA node(s)")
    put("stepping", fields.get("Stepping") or None, "Stepping")
    if fields.get("Architecture"):
        result.values["architecture"] = fields["Architecture"]
    if fields.get("Vendor ID"):
        result.values["vendor"] = fields["Vendor ID"]
    return result


_LSCPU_FACTS = ("cpu_model", "cpus", "sockets", "cores_per_socket", "threads_per_core",
                "numa_nodes", "stepping")


def parse_cpu_cores(siblings: str, lscpu_cores: str) -> tuple[list[list[int]] | None, str | None]:
    """The logical CPUs grouped by physical core, lowest CPU first: ([[0, 72], [1, 73], ...],
    None), or (None, why not).

    `siblings` is ``grep -H .`` over ``cpuN/topology/thread_siblings_list`` (the kernel's own
    word on which CPUs share a core); `lscpu_cores` is ``lscpu -p=CPU,CORE,SOCKET``, read
    when sysfs gave nothing (a core number is unique only within its socket)."""
    cores: set[tuple[int, ...]] = set()
    for line in siblings.splitlines():
        path, sep, value = line.rpartition(":")
        match = re.search(r"/cpu(\d+)/topology/thread_siblings_list$", path) if sep else None
        if match is None:
            continue
        try:
            cpus = {int(match.group(1)), *parse_cpu_list(value.strip())}
        except ValueError:
            continue
        cores.add(tuple(sorted(cpus)))
    if not cores:
        by_core: dict[tuple[str, str], list[int]] = {}
        for line in lscpu_cores.splitlines():
            fields = line.strip().split(",")
            if line.startswith("#") or len(fields) < 3 or not fields[0].isdigit() or not fields[1]:
                continue
            by_core.setdefault((fields[2], fields[1]), []).append(int(fields[0]))
        cores = {tuple(sorted(cpus)) for cpus in by_core.values()}
    if not cores:
        return None, "neither sysfs topology/thread_siblings_list nor lscpu -p gave the cores"
    return [list(core) for core in sorted(cores)], None


def parse_smt(text: str) -> bool | None:
    """/sys/devices/system/cpu/smt/active: "1" -> True, "0" -> False."""
    value = text.strip()
    return {"1": True, "0": False}.get(value)


def parse_turbo(no_turbo: str, boost: str) -> bool | None:
    """Turbo state from intel_pstate/no_turbo (1 means turbo OFF) or, for other cpufreq
    drivers (acpi-cpufreq, amd-pstate), cpufreq/boost (1 means boost ON)."""
    value = no_turbo.strip()
    if value in ("0", "1"):
        return value == "0"
    value = boost.strip()
    if value in ("0", "1"):
        return value == "1"
    return None


# --------------------------------------------------------------------------------------
# Frequencies and governors
# --------------------------------------------------------------------------------------


def group_counts(values: Iterable[str]) -> str | None:
    """Group equal values like ``sort | uniq -c`` in the Intel script: "144x performance",
    or "72x performance, 72x powersave" (most common first, then by value)."""
    counts = Counter(v for v in values if v)
    if not counts:
        return None
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{count}x {value}" for value, count in ordered)


def _khz_to_mhz(text: str) -> str:
    """"800000" (kHz, as sysfs gives it) -> "800 MHz"; non-numbers pass through."""
    value = text.strip()
    if not value.isdigit():
        return value
    khz = int(value)
    if khz % 1000 == 0:
        return f"{khz // 1000} MHz"
    return f"{khz / 1000:.1f} MHz"


def parse_cpufreq_listing(text: str, *, frequency: bool) -> str | None:
    """Group the ``grep -H . .../cpuN/cpufreq/FILE`` lines (``path:value``) of all CPUs.
    With `frequency`, values are kHz and shown in MHz."""
    values = []
    for line in text.splitlines():
        _, sep, value = line.rpartition(":")
        value = (value if sep else line).strip()
        if value:
            values.append(_khz_to_mhz(value) if frequency else value)
    return group_counts(values)


def parse_uncore_sysfs(text: str) -> str | None:
    """intel_uncore_frequency: ``grep -H`` lines of ``<die>/min_freq_khz`` and
    ``<die>/max_freq_khz``, grouped per die range: "2x 800-2400 MHz"."""
    dies: dict[str, dict[str, str]] = {}
    for line in text.splitlines():
        path, sep, value = line.rpartition(":")
        if not sep:
            continue
        parts = path.split("/")
        if len(parts) < 2 or parts[-1] not in ("min_freq_khz", "max_freq_khz"):
            continue
        dies.setdefault(parts[-2], {})[parts[-1]] = value.strip()
    ranges = []
    for values in dies.values():
        low, high = values.get("min_freq_khz"), values.get("max_freq_khz")
        if low and high:
            ranges.append(f"{_khz_to_mhz(low).removesuffix(' MHz')}-{_khz_to_mhz(high)}")
    return group_counts(ranges)


def parse_rdmsr_uncore(text: str) -> tuple[str | None, str | None]:
    """``rdmsr -p 0 0x620`` output followed by "exit N": (value, None) or (None, reason).

    MSR 0x620 (UNCORE_RATIO_LIMIT) holds the maximum ratio in bits 0-6 and the minimum
    ratio in bits 8-14, in units of 100 MHz."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    status = None
    if lines and lines[-1].startswith("exit "):
        status = lines.pop()[5:]
    if status not in (None, "0") or not lines:
        detail = lines[0] if lines else "no output"
        return None, f"rdmsr 0x620 failed: {detail} (is the msr module loaded?)"
    try:
        raw = int(lines[0], 16)
    except ValueError:
        return None, f"rdmsr 0x620 printed {lines[0]!r}"
    high, low = (raw & 0x7F) * 100, ((raw >> 8) & 0x7F) * 100
    return f"{low}-{high} MHz (MSR 0x620)", None


# --------------------------------------------------------------------------------------
# irqbalance
# --------------------------------------------------------------------------------------


def parse_irqbalance(systemctl: str, pgrep: str, tools: set[str]) -> tuple[str | None, str | None]:
    """irqbalance state: "active", "inactive", "failed" (systemd's word) or "not
    installed"; or (None, reason). `pgrep` is the "exit N" line of ``pgrep -x
    irqbalance``; `tools` the tools the script found."""
    if "pgrep" in tools and pgrep.strip() == "exit 0":
        return "active", None
    state = systemctl.strip().splitlines()[0].strip() if systemctl.strip() else ""
    if "irqbalance" not in tools:
        # systemctl says "inactive" for units that do not exist, so ask the file system.
        if state == "active":
            return "active", None
        return "not installed", None
    if state in ("active", "inactive", "failed", "activating", "deactivating"):
        return state, None
    if "pgrep" in tools:
        return "inactive", None
    return None, "neither systemctl nor pgrep could tell whether irqbalance runs"


# --------------------------------------------------------------------------------------
# Network interface
# --------------------------------------------------------------------------------------


def parse_ip_route_get(text: str) -> tuple[str | None, str | None, str | None]:
    """(device, source address, route type) from ``ip -j route get ADDR`` or its text
    form ("local 10.0.0.5 dev lo table local src 10.0.0.5 uid 0")."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            routes = json.loads(stripped)
        except ValueError:
            routes = []
        if routes and isinstance(routes[0], dict):
            route = routes[0]
            return route.get("dev"), route.get("prefsrc"), route.get("type", "unicast")
        return None, None, None
    words = stripped.split()
    if not words:
        return None, None, None

    def after(keyword: str) -> str | None:
        return words[words.index(keyword) + 1] if keyword in words[:-1] else None

    kind = words[0] if words[0] in ("local", "broadcast", "multicast", "unreachable") else "unicast"
    return after("dev"), after("src"), kind


def parse_ip_addr_show(text: str) -> str | None:
    """The interface holding the address, from ``ip -j addr show to ADDR`` or
    ``ip -o addr show to ADDR`` ("2: eth0    inet 10.0.0.5/24 ...")."""
    stripped = text.strip()
    if stripped.startswith("["):
        try:
            links = json.loads(stripped)
        except ValueError:
            return None
        for link in links:
            if isinstance(link, dict) and link.get("addr_info"):
                return link.get("ifname")
        return None
    for line in stripped.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].endswith(":"):
            return parts[1].split("@")[0]
    return None


def parse_net_drivers(text: str) -> dict[str, tuple[str | None, str | None]]:
    """{interface: (driver, module version)} from the script's net_drivers lines
    ("eth0 ice 1.13.7" with "-" for missing)."""
    drivers: dict[str, tuple[str | None, str | None]] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3:
            driver, version = (None if p == "-" else p for p in parts[1:])
            drivers[parts[0]] = (driver, version)
    return drivers


def parse_ethtool(text: str) -> dict[str, str]:
    """``ethtool -i DEV``: {"driver", "version", "firmware-version", "bus-info", ...}
    with empty values left out."""
    info: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and value.strip():
            info[key.strip()] = value.strip()
    return info


# --------------------------------------------------------------------------------------
# Putting it together
# --------------------------------------------------------------------------------------


def parse_facts_output(sections: dict[str, str]) -> Parsed:
    """Every fact except the NIC from the script's sections (see `parse_sections`)."""
    result = Parsed()
    tools = set(sections.get("tools", "").split())

    os_name = parse_os_release(sections.get("os-release", ""))
    if os_name is None:
        os_name = parse_lsb_release(sections.get("lsb_release", ""))
    if os_name is not None:
        result.values["os"] = os_name
    else:
        result.unknown["os"] = "no /etc/os-release" + (
            " and lsb_release printed nothing" if "lsb_release" in tools else " and lsb_release not installed"
        )

    result.merge(parse_uname(sections.get("uname", "")))

    if "lscpu" in tools:
        lscpu = parse_lscpu(sections.get("lscpu", ""))
    else:
        lscpu = Parsed(unknown={name: "lscpu not installed (package util-linux)" for name in _LSCPU_FACTS})
    vendor = lscpu.values.pop("vendor", None)
    # uname -m is authoritative for the architecture; lscpu only fills it in if uname failed.
    if "architecture" in result.values:
        lscpu.values.pop("architecture", None)
    result.merge(lscpu)

    cores, cores_reason = parse_cpu_cores(sections.get("thread_siblings", ""),
                                          sections.get("lscpu_cores", ""))
    if cores is None:
        result.unknown["cpu_cores"] = cores_reason or "no CPU topology"
    else:
        result.values["cpu_cores"] = cores

    smt = parse_smt(sections.get("smt", ""))
    if smt is None:
        result.unknown["smt"] = "no /sys/devices/system/cpu/smt/active (kernel before 4.19?)"
    else:
        result.values["smt"] = smt

    has_cpufreq = sections.get("cpufreq_dirs", "").strip() not in ("", "0")
    no_cpufreq = "no cpufreq in sysfs (virtual machine, or cpufreq driver not loaded?)"
    turbo = parse_turbo(sections.get("no_turbo", ""), sections.get("boost", ""))
    if turbo is None:
        result.unknown["turbo"] = (
            "neither intel_pstate/no_turbo nor cpufreq/boost in sysfs" if has_cpufreq else no_cpufreq
        )
    else:
        result.values["turbo"] = turbo

    for name, section, sysfs_file, frequency in (
        ("governors", "governors", "scaling_governor", False),
        ("min_frequency", "min_freq", "scaling_min_freq", True),
        ("max_frequency", "max_freq", "scaling_max_freq", True),
    ):
        grouped = parse_cpufreq_listing(sections.get(section, ""), frequency=frequency)
        if grouped is None:
            result.unknown[name] = no_cpufreq if not has_cpufreq else f"no readable cpufreq/{sysfs_file}"
        else:
            result.values[name] = grouped

    uncore = parse_uncore_sysfs(sections.get("uncore", ""))
    if uncore is not None:
        result.values["uncore_frequency"] = uncore
    elif sections.get("rdmsr", "").strip():
        value, reason = parse_rdmsr_uncore(sections["rdmsr"])
        if value is not None:
            result.values["uncore_frequency"] = value
        else:
            result.unknown["uncore_frequency"] = reason or "rdmsr 0x620 failed"
    else:
        result.unknown["uncore_frequency"] = _uncore_reason(vendor, tools, sections.get("uid", "").strip())

    state, reason = parse_irqbalance(
        sections.get("irqbalance_systemctl", ""), sections.get("irqbalance_pgrep", ""), tools
    )
    if state is not None:
        result.values["irqbalance"] = state
    else:
        result.unknown["irqbalance"] = reason or "irqbalance state unknown"
    return result


def _uncore_reason(vendor: str | None, tools: set[str], uid: str) -> str:
    if vendor is not None and vendor != "GenuineIntel":
        return f"not an Intel CPU ({vendor}); uncore frequency is read from Intel sysfs or MSR 0x620"
    reason = "no intel_uncore_frequency in sysfs"
    if uid != "0":
        return reason + ", and reading MSR 0x620 needs root"
    if "rdmsr" not in tools:
        return reason + ", and rdmsr not installed (package msr-tools)"
    return reason


def _resolve(address: str) -> tuple[str | None, str | None]:
    """(IP address, None) or (None, reason). Names are resolved on this machine."""
    try:
        return str(ipaddress.ip_address(address.strip("[]"))), None
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(address, None, type=socket.SOCK_STREAM)
    except OSError as exc:
        return None, f"cannot resolve {address}: {exc.strerror or exc}"
    return str(infos[0][4][0]), None


def nic_interface(sections: dict[str, str], address: str) -> tuple[str | None, str | None, str | None]:
    """(interface, local address, None) for the NIC that carries `address`, or
    (None, None, reason), from the script's "tools", "route" and "addr" sections."""
    if "ip" not in set(sections.get("tools", "").split()):
        return None, None, "ip not installed (package iproute2)"
    dev, src, kind = parse_ip_route_get(sections.get("route", ""))
    if kind == "local":
        # The address is this machine's own: the route goes through lo, but the interface
        # that carries the traffic is the one holding the address.
        dev = parse_ip_addr_show(sections.get("addr", "")) or dev
        src = address
    if dev is None:
        return None, None, f"no route to {address}"
    return dev, src, None


def parse_nic(
    sections: dict[str, str], address: str, ethtool: str | None, ethtool_error: str | None = None
) -> tuple[NicFacts | None, dict[str, str]]:
    """NicFacts for the interface carrying `address`, and the unknown reasons.

    `ethtool` is the output of ``ethtool -i DEV`` for that interface, or None when it was
    not run (then `ethtool_error` says why it failed, or ethtool is not in "tools"). The
    driver and its version fall back to sysfs (net_drivers section); the firmware version
    only ethtool knows."""
    dev, src, reason = nic_interface(sections, address)
    if dev is None:
        return None, {"nic": reason or "no interface found"}
    nic = NicFacts(interface=dev, address=src)
    unknown: dict[str, str] = {}
    if dev == "lo":
        for name in ("driver", "driver_version", "firmware"):
            unknown[f"nic.{name}"] = "loopback interface has no driver"
        return nic, unknown
    tools = set(sections.get("tools", "").split())
    sysfs_driver, sysfs_version = parse_net_drivers(sections.get("net_drivers", "")).get(dev, (None, None))
    info = parse_ethtool(ethtool) if ethtool is not None else {}
    if ethtool_error:
        ethtool_reason = ethtool_error
    elif "ethtool" not in tools:
        ethtool_reason = "ethtool not installed"
    elif ethtool is None:
        ethtool_reason = "ethtool was not run"
    else:
        ethtool_reason = ""
    nic.driver = info.get("driver") or sysfs_driver
    nic.driver_version = info.get("version") or sysfs_version
    nic.firmware = info.get("firmware-version")
    if nic.driver is None:
        unknown["nic.driver"] = ethtool_reason or "virtual interface (no device driver in sysfs)"
    if nic.driver_version is None:
        unknown["nic.driver_version"] = ethtool_reason or f"driver {nic.driver} reports no version"
    if nic.firmware is None:
        unknown["nic.firmware"] = ethtool_reason or f"driver {nic.driver} reports no firmware version"
    return nic, unknown


def _run_ethtool(host: Host, sections: dict[str, str], address: str) -> tuple[str | None, str | None]:
    """Run ``ethtool -i`` for the NIC of `address` when there is one worth asking about:
    (output, None), (None, why it failed) or (None, None) when it was not run."""
    dev, _, _ = nic_interface(sections, address)
    if dev is None or dev == "lo" or "ethtool" not in set(sections.get("tools", "").split()):
        return None, None
    result = host.run(f'PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin" ethtool -i {shlex.quote(dev)}', timeout=30)
    if result.ok:
        return result.stdout, None
    first = (result.stderr.strip().splitlines() or [f"exit status {result.exit_status}"])[0]
    return None, f"ethtool -i {dev} failed: {first}"


def collect_facts(host: Host, *, role: str, target_address: str | None = None) -> MachineFacts:
    """Collect the facts of `host`. `target_address` (IP address or name; names are
    resolved on this machine) selects the NIC to describe: the interface that holds it, or
    the one the route to it leaves through. Unreadable facts go into `unknown`."""
    address, resolve_reason = (None, None)
    if target_address is not None:
        address, resolve_reason = _resolve(target_address)
    collected_at = datetime.now(timezone.utc)
    result = host.run(facts_script(address), timeout=60)
    sections = parse_sections(result.stdout)
    parsed = parse_facts_output(sections)
    if not sections:
        first = (result.stderr.strip().splitlines() or [f"exit status {result.exit_status}"])[0]
        parsed.unknown = {name: f"the facts script did not run: {first}" for name in parsed.unknown}
    nic: NicFacts | None = None
    if target_address is None:
        parsed.unknown["nic"] = "no target address given"
    elif address is None:
        parsed.unknown["nic"] = resolve_reason or f"cannot resolve {target_address}"
    else:
        ethtool, ethtool_error = _run_ethtool(host, sections, address)
        nic, nic_unknown = parse_nic(sections, address, ethtool, ethtool_error)
        parsed.unknown.update(nic_unknown)
    return MachineFacts(
        role=role,
        host=host.name,
        collected_at=collected_at,
        nic=nic,
        unknown=dict(sorted(parsed.unknown.items())),
        **{k: v for k, v in parsed.values.items() if k in MachineFacts.model_fields},
    )
