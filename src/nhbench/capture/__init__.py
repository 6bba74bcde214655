"""Captures taken on a host while a sweep step runs: mpstat per-CPU load and perf flame
graphs."""

from ._models import CaptureResult, CaptureSpec, CpuGroupLoad

__all__ = ["CaptureResult", "CaptureSpec", "CpuGroupLoad"]
