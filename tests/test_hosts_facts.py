"""Machine facts: collection on this machine (locally and over SSH) and parsing of recorded
output of other machines (tests/data/facts/, see its README for what each file is).

Nothing is mocked: collection runs the real facts script; the "missing tool" case runs it
with a PATH that really lacks the tools.
"""

from __future__ import annotations

import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from support.sshd_fixture import SSHServer

from nhbench.hosts import CommandResult, LocalHost, MachineFacts, collect_facts
from nhbench.hosts._facts import (
    facts_script,
    group_counts,
    nic_interface,
    parse_cpufreq_listing,
    parse_ethtool,
    parse_facts_output,
    parse_ip_addr_show,
    parse_ip_route_get,
    parse_irqbalance,
    parse_lsb_release,
    parse_lscpu,
    parse_nic,
    parse_os_release,
    parse_rdmsr_uncore,
    parse_sections,
    parse_smt,
    parse_turbo,
    parse_uncore_sysfs,
)

DATA = Path(__file__).parent / "data" / "facts"


def _data(name: str) -> str:
    return (DATA / name).read_text()


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


# --------------------------------------------------------------------------------------
# Real output of this machine
# --------------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("lscpu") is None, reason="lscpu (util-linux) is not installed")
def test_lscpu_json_and_text_agree_on_this_machine() -> None:
    as_json = parse_lscpu(_run(["lscpu", "-J"]))
    as_text = parse_lscpu(_run(["lscpu"]))
    assert as_json.values == as_text.values
    assert as_json.values["cpus"] == os.cpu_count()
    assert as_json.values["architecture"] == platform.machine()
    assert as_json.values["sockets"] * as_json.values["cores_per_socket"] * as_json.values[
        "threads_per_core"
    ] >= as_json.values["cpus"]


def test_os_release_of_this_machine() -> None:
    text = Path("/etc/os-release").read_text()
    assert parse_os_release(text) == platform.freedesktop_os_release()["PRETTY_NAME"]


def test_ip_route_get_on_this_machine() -> None:
    if shutil.which("ip") is None:
        pytest.skip("ip (iproute2) is not installed")
    assert parse_ip_route_get(_run(["ip", "-j", "route", "get", "127.0.0.1"])) == ("lo", "127.0.0.1", "local")
    assert parse_ip_route_get(_run(["ip", "route", "get", "127.0.0.1"])) == ("lo", "127.0.0.1", "local")
    assert parse_ip_addr_show(_run(["ip", "-j", "addr", "show", "to", "127.0.0.1"])) == "lo"
    assert parse_ip_addr_show(_run(["ip", "-o", "addr", "show", "to", "127.0.0.1"])) == "lo"


def test_collect_facts_on_this_machine() -> None:
    facts = collect_facts(LocalHost(), role="loadgen", target_address="127.0.0.1")
    assert isinstance(facts, MachineFacts)
    assert (facts.role, facts.host) == ("loadgen", "local")
    assert facts.hostname == socket.gethostname()
    assert facts.kernel == platform.release()
    assert facts.architecture == platform.machine()
    assert facts.os == platform.freedesktop_os_release()["PRETTY_NAME"]
    if shutil.which("lscpu"):
        assert facts.cpus == os.cpu_count()
        assert facts.cpu_model
    # Every fact is either known or has a reason, never both and never neither.
    # calibration is added by a sweep when asked for (--calibrate), never by collect_facts;
    # so is cluster (collect_cluster, with its own unknown reasons).
    for name in MachineFacts.model_fields:
        if name in ("unknown", "collected_at", "nic", "calibration", "cluster"):
            continue
        value = getattr(facts, name)
        assert (value is None) == (name in facts.unknown), (name, value, facts.unknown)
    # The loopback interface carries 127.0.0.1 and has no driver to report.
    assert facts.nic is not None and facts.nic.interface == "lo"
    assert facts.unknown["nic.driver"] == "loopback interface has no driver"
    # The governor listing matches sysfs, grouped like the Intel script's `uniq -c`.
    governors = sorted(Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor"))
    if governors:
        assert facts.governors == group_counts(p.read_text().strip() for p in governors)
    else:
        assert facts.unknown["governors"].startswith("no cpufreq in sysfs")
    # The model round-trips through JSON, as campaign files store it.
    assert MachineFacts.model_validate_json(facts.model_dump_json()) == facts


def test_collect_facts_for_a_real_nic() -> None:
    """The interface of the default route (this machine's real or virtual NIC)."""
    route = subprocess.run(["ip", "-j", "route", "get", "192.0.2.1"], capture_output=True, text=True, check=False)
    if shutil.which("ip") is None or route.returncode != 0:
        pytest.skip("no ip command or no route off this machine")
    dev, src, _ = parse_ip_route_get(route.stdout)
    facts = collect_facts(LocalHost(), role="loadgen", target_address="192.0.2.1")
    assert facts.nic is not None
    assert (facts.nic.interface, facts.nic.address) == (dev, src)
    driver_link = Path(f"/sys/class/net/{dev}/device/driver")
    if driver_link.exists():
        assert facts.nic.driver == os.path.basename(os.readlink(driver_link))
    if facts.nic.firmware is None:
        assert "nic.firmware" in facts.unknown


def test_collect_facts_locally_and_over_ssh_agree(sshd: SSHServer) -> None:
    local = collect_facts(LocalHost(), role="target", target_address="127.0.0.1")
    with sshd.connect() as host:
        remote = collect_facts(host, role="target", target_address="127.0.0.1")
    assert remote.host == f"{sshd.user}@127.0.0.1:{sshd.port}"
    ignore = {"host", "collected_at"}
    assert remote.model_dump(exclude=ignore) == local.model_dump(exclude=ignore)


def test_missing_tools_give_unknown_not_an_error(tmp_path: Path) -> None:
    """Run the real script with a PATH that has only the basic commands it needs, so that
    lscpu, pgrep and systemctl (all in /usr/bin) are really missing. (ip and ethtool stay
    reachable: the script adds the sbin directories on purpose.)"""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("cat", "grep", "id", "ls", "readlink", "uname", "wc"):
        found = shutil.which(tool)
        assert found is not None, tool
        (bin_dir / tool).symlink_to(found)

    class BarePathHost(LocalHost):
        name = "bare-path"

        def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
            proc = subprocess.run(
                ["/bin/sh", "-c", command], capture_output=True, text=True, timeout=timeout,
                env={"PATH": str(bin_dir)},
                check=False,
            )
            return CommandResult(command, proc.returncode, proc.stdout, proc.stderr)

    facts = collect_facts(BarePathHost(), role="target")
    assert facts.cpu_model is None
    assert facts.unknown["cpu_model"] == "lscpu not installed (package util-linux)"
    assert facts.unknown["sockets"] == "lscpu not installed (package util-linux)"
    if shutil.which("irqbalance", path="/usr/local/sbin:/usr/sbin:/sbin") is None:
        # Not installed is a fact that needs neither pgrep nor systemctl.
        assert facts.irqbalance == "not installed"
    else:
        assert facts.unknown["irqbalance"] == "neither systemctl nor pgrep could tell whether irqbalance runs"
    assert facts.unknown["nic"] == "no target address given"
    # What needs no tool is still there.
    assert facts.kernel == platform.release()
    assert facts.os == platform.freedesktop_os_release()["PRETTY_NAME"]


def test_a_host_that_cannot_run_the_script() -> None:
    class BrokenHost(LocalHost):
        name = "broken"

        def run(self, command: str, *, timeout: float = 60.0, sudo: bool = False) -> CommandResult:
            # A real failing command, as a host without a POSIX sh would give.
            return super().run("echo 'sh: not found' >&2; exit 127", timeout=timeout)

    facts = collect_facts(BrokenHost(), role="target", target_address="127.0.0.1")
    assert facts.kernel is None
    assert facts.unknown["kernel"] == "the facts script did not run: sh: not found"
    assert facts.unknown["cpu_model"] == "the facts script did not run: sh: not found"


def test_unresolvable_target_address() -> None:
    facts = collect_facts(LocalHost(), role="loadgen", target_address="nhbench-no-such-host.invalid")
    assert facts.nic is None
    assert facts.unknown["nic"].startswith("cannot resolve nhbench-no-such-host.invalid")


def test_target_address_is_quoted() -> None:
    # A hostile "address" never reaches the shell unquoted (it is resolved first, and
    # the script quotes what it gets).
    assert "'1.2.3.4; rm -rf /'" in facts_script("1.2.3.4; rm -rf /")


# --------------------------------------------------------------------------------------
# Recorded output of other machines
# --------------------------------------------------------------------------------------


# The processor facts of the two-socket Xeon sample, read from lscpu's JSON alone
# (lscpu-xeon-8360y-2s.json) and as part of the whole facts script's output
# (xeon-8360y-2s.facts.txt): both readings must give the same values.
XEON_8360Y_2S_CPU = {
        "cpu_model": "Intel(R) Xeon(R) Platinum 8360Y CPU @ 2.40GHz",
        "cpus": 144,
        "sockets": 2,
        "cores_per_socket": 36,
        "threads_per_core": 2,
        "numa_nodes": 2,
        "stepping": "6",
}


def test_lscpu_two_socket_xeon_nested_json() -> None:
    parsed = parse_lscpu(_data("lscpu-xeon-8360y-2s.json"))
    assert parsed.values == {
        **XEON_8360Y_2S_CPU,
        "architecture": "x86_64",
        "vendor": "GenuineIntel",
    }
    assert parsed.unknown == {}


def test_lscpu_graviton2_text() -> None:
    parsed = parse_lscpu(_data("lscpu-graviton2.txt"))
    assert parsed.values["cpu_model"] == "Neoverse-N1"
    assert parsed.values["stepping"] == "r3p1"
    assert (parsed.values["cpus"], parsed.values["sockets"], parsed.values["cores_per_socket"]) == (64, 1, 64)
    assert parsed.values["architecture"] == "aarch64"


def test_lscpu_arm_clusters_without_sockets() -> None:
    parsed = parse_lscpu(_data("lscpu-graviton3-cluster.txt"))
    assert parsed.values["cpu_model"] == "Neoverse-V1"
    assert parsed.values["cores_per_socket"] == 16
    assert "sockets" not in parsed.values
    assert parsed.unknown["sockets"] == "lscpu reports Socket(s) as '-'"


def test_lscpu_empty_or_garbage() -> None:
    assert parse_lscpu("").unknown["cpu_model"] == "lscpu printed nothing"
    assert parse_lscpu("{not json").unknown["cpu_model"] == "lscpu printed nothing it could parse"


def test_os_release_and_lsb_release() -> None:
    assert parse_os_release(_data("os-release-ubuntu-2204.txt")) == "Ubuntu 22.04.4 LTS"
    assert parse_os_release(_data("os-release-rhel9.txt")) == "Red Hat Enterprise Linux 9.3 (Plow)"
    assert parse_os_release('NAME="Alpine Linux"\nVERSION="3.19"') == "Alpine Linux 3.19"
    assert parse_os_release("") is None
    assert parse_lsb_release('"Ubuntu 20.04.6 LTS"\n') == "Ubuntu 20.04.6 LTS"
    assert parse_lsb_release("") is None


def test_governors_grouped_like_uniq_c() -> None:
    assert parse_cpufreq_listing(_data("governors-144-performance.txt"), frequency=False) == "144x performance"
    assert parse_cpufreq_listing(_data("min-freq-144.txt"), frequency=True) == "144x 800 MHz"
    assert parse_cpufreq_listing(_data("max-freq-144.txt"), frequency=True) == "144x 3500 MHz"
    assert parse_cpufreq_listing(_data("governors-8-mixed.txt"), frequency=False) == "4x performance, 4x powersave"
    assert parse_cpufreq_listing("", frequency=False) is None
    assert group_counts(["b", "a", "b"]) == "2x b, 1x a"
    assert parse_cpufreq_listing("/x/cpu0/cpufreq/scaling_max_freq:2450500", frequency=True) == "1x 2450.5 MHz"


def test_smt_and_turbo() -> None:
    assert (parse_smt("1\n"), parse_smt("0"), parse_smt("")) == (True, False, None)
    # intel_pstate/no_turbo = 1 means turbo is OFF; cpufreq/boost = 1 means it is ON.
    assert parse_turbo("1", "") is False
    assert parse_turbo("0", "") is True
    assert parse_turbo("", "1") is True
    assert parse_turbo("", "0") is False
    assert parse_turbo("", "") is None


def test_uncore_from_sysfs_and_msr() -> None:
    sections = parse_sections(_data("xeon-8360y-2s.facts.txt"))
    assert parse_uncore_sysfs(sections["uncore"]) == "2x 800-2400 MHz"
    # 0x819: max ratio 0x19 = 25 (2500 MHz), min ratio 0x08 = 8 (800 MHz).
    assert parse_rdmsr_uncore("819\nexit 0") == ("800-2500 MHz (MSR 0x620)", None)
    value, reason = parse_rdmsr_uncore("rdmsr: open: No such file or directory\nexit 1")
    assert value is None
    assert reason == "rdmsr 0x620 failed: rdmsr: open: No such file or directory (is the msr module loaded?)"


def test_irqbalance_states() -> None:
    every_tool = {"systemctl", "pgrep", "irqbalance"}
    assert parse_irqbalance("active", "exit 0", every_tool) == ("active", None)
    assert parse_irqbalance("inactive", "exit 1", every_tool) == ("inactive", None)
    # Not installed: systemctl says "inactive" for a unit that does not exist.
    assert parse_irqbalance("inactive", "exit 1", {"systemctl", "pgrep"}) == ("not installed", None)
    # No systemd (a container): pgrep alone decides.
    assert parse_irqbalance("", "exit 1", {"pgrep", "irqbalance"}) == ("inactive", None)
    assert parse_irqbalance("", "exit 0", {"pgrep", "irqbalance"}) == ("active", None)
    assert parse_irqbalance("", "", {"irqbalance"}) == (
        None, "neither systemctl nor pgrep could tell whether irqbalance runs"
    )


def test_ethtool_drivers() -> None:
    ice = parse_ethtool(_data("ethtool-i-ice.txt"))
    assert (ice["driver"], ice["version"], ice["firmware-version"]) == ("ice", "1.13.7", "4.40 0x8001c967 1.3534.0")
    assert "expansion-rom-version" not in ice  # empty values are left out
    mlx = parse_ethtool(_data("ethtool-i-mlx5.txt"))
    assert (mlx["driver"], mlx["firmware-version"]) == ("mlx5_core", "22.36.1010 (MT_0000000359)")


def test_ip_text_forms() -> None:
    assert parse_ip_route_get(_data("ip-route-get-text.txt")) == ("ens785f0", "10.10.0.5", "unicast")
    assert parse_ip_route_get("local 10.10.0.5 dev lo table local src 10.10.0.5 uid 0") == (
        "lo", "10.10.0.5", "local"
    )
    assert parse_ip_route_get("") == (None, None, None)
    assert parse_ip_addr_show(_data("ip-addr-show-o.txt")) == "ens785f0"
    assert parse_ip_addr_show("[]") is None


# The whole samples were recorded before the facts script read the CPU topology (its
# thread_siblings and lscpu_cores sections): the cores are unknown, and say so.
NO_TOPOLOGY_SECTIONS = "neither sysfs topology/thread_siblings_list nor lscpu -p gave the cores"


def test_whole_xeon_sample() -> None:
    sections = parse_sections(_data("xeon-8360y-2s.facts.txt"))
    parsed = parse_facts_output(sections)
    assert parsed.values == {
        "os": "Ubuntu 22.04.4 LTS",
        "hostname": "icx-sut-01",
        "kernel": "5.15.0-105-generic",
        "architecture": "x86_64",
        **XEON_8360Y_2S_CPU,
        "smt": True,
        "turbo": True,
        "governors": "144x performance",
        "min_frequency": "144x 800 MHz",
        "max_frequency": "144x 3500 MHz",
        "uncore_frequency": "2x 800-2400 MHz",
        "irqbalance": "inactive",
    }
    assert parsed.unknown == {"cpu_cores": NO_TOPOLOGY_SECTIONS}
    # The target address is the machine's own: the NIC is the one holding it, not lo.
    nic, unknown = parse_nic(sections, "10.10.0.5", _data("ethtool-i-ice.txt"))
    assert nic is not None
    assert nic.model_dump() == {
        "interface": "ens785f0", "address": "10.10.0.5", "driver": "ice",
        "driver_version": "1.13.7", "firmware": "4.40 0x8001c967 1.3534.0",
    }
    assert unknown == {}


def test_whole_sapphire_rapids_sample_without_ethtool() -> None:
    sections = parse_sections(_data("spr-8480-no-ethtool.facts.txt"))
    parsed = parse_facts_output(sections)
    assert parsed.values["cpus"] == 56  # online CPUs, not the 112 present
    assert parsed.values["smt"] is False
    assert parsed.values["turbo"] is False
    assert parsed.values["governors"] == "28x performance, 28x powersave"
    assert parsed.values["max_frequency"] == "56x 2000 MHz"
    assert parsed.values["uncore_frequency"] == "800-2500 MHz (MSR 0x620)"
    assert parsed.values["irqbalance"] == "active"
    assert parsed.values["os"] == "Red Hat Enterprise Linux 9.3 (Plow)"
    assert parsed.unknown == {"cpu_cores": NO_TOPOLOGY_SECTIONS}
    # ethtool is missing: driver and version come from sysfs, the firmware is unknown.
    nic, unknown = parse_nic(sections, "10.30.0.9", None)
    assert nic is not None
    assert (nic.interface, nic.address, nic.driver, nic.driver_version) == (
        "ens1f0np0", "10.30.0.2", "mlx5_core", "5.14.0-362.8.1.el9_3.x86_64"
    )
    assert unknown == {"nic.firmware": "ethtool not installed"}


def test_whole_vm_sample_captured_here() -> None:
    sections = parse_sections(_data("firecracker-epyc-vm.facts.txt"))
    parsed = parse_facts_output(sections)
    assert parsed.values["cpu_model"] == "AMD EPYC"
    assert parsed.values["smt"] is False
    assert parsed.values["irqbalance"] == "not installed"
    no_cpufreq = "no cpufreq in sysfs (virtual machine, or cpufreq driver not loaded?)"
    assert parsed.unknown == {
        "turbo": no_cpufreq,
        "governors": no_cpufreq,
        "min_frequency": no_cpufreq,
        "max_frequency": no_cpufreq,
        "uncore_frequency": "not an Intel CPU (AuthenticAMD); uncore frequency is read from Intel sysfs or MSR 0x620",
        "cpu_cores": NO_TOPOLOGY_SECTIONS,
    }
    assert nic_interface(sections, "8.8.8.8") == ("eth0", "192.0.2.2", None)
    nic, unknown = parse_nic(sections, "8.8.8.8", "driver: virtio_net\nversion: 1.0.0\nfirmware-version: \n")
    assert nic is not None and (nic.driver, nic.driver_version) == ("virtio_net", "1.0.0")
    assert unknown == {"nic.firmware": "driver virtio_net reports no firmware version"}


def test_uncore_reasons() -> None:
    sections = parse_sections(_data("xeon-8360y-2s.facts.txt"))
    sections["uncore"] = ""
    sections["uid"] = "1000"
    assert parse_facts_output(sections).unknown["uncore_frequency"] == (
        "no intel_uncore_frequency in sysfs, and reading MSR 0x620 needs root"
    )
    sections["uid"] = "0"
    sections["tools"] = sections["tools"].replace("rdmsr", "")
    assert parse_facts_output(sections).unknown["uncore_frequency"] == (
        "no intel_uncore_frequency in sysfs, and rdmsr not installed (package msr-tools)"
    )


def test_nic_without_ip_or_route() -> None:
    sections = parse_sections(_data("xeon-8360y-2s.facts.txt"))
    assert parse_nic({**sections, "route": "", "addr": ""}, "10.99.0.1", None) == (
        None, {"nic": "no route to 10.99.0.1"}
    )
    no_ip = {**sections, "tools": "lscpu"}
    assert parse_nic(no_ip, "10.10.0.5", None) == (None, {"nic": "ip not installed (package iproute2)"})
