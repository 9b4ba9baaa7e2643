"""NVML, queried one field at a time and tolerant of whatever the driver, the GPU or our permissions refuse.

A field NVML will not give is recorded as ``Unsupported`` (in JSON
``{"unsupported": "<error name>"}``) and the rest is still collected; without
an NVIDIA driver, starting NVML says why in plain words. The NVML module is a
parameter everywhere (``nvml=None`` imports ``pynvml``, from nvidia-ml-py), so
tests can hand in a fake.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from datamodel import JsonModel, doc

# nvmlValueType_t -> the member of nvmlValue_t holding the number.
FIELD_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

# scopeId asking nvmlDeviceGetFieldValues for the sum over all NVLinks (UINT_MAX).
ALL_LINKS_SCOPE = 0xFFFFFFFF

# Why nvmlInit failed, in plain words, by NVML error name.
INIT_FAILURES = {
    "LibraryNotFound": "NVML library not found: no NVIDIA driver on this machine",
    "DriverNotLoaded": "NVIDIA driver not loaded: no usable NVIDIA GPU on this machine",
    "NoPermission": "no permission to use NVML",
    "LibRmVersionMismatch": "NVML library and kernel driver versions differ (reboot or reinstall the driver)",
}


@dataclass(frozen=True)
class Unsupported(JsonModel):
    """A field NVML would not give: the error's name stands in for the value."""

    error: str = doc("why NVML gave no value: its error's name (NotSupported, NoPermission, "
                            "FunctionNotFound, ...)", json="unsupported")


def is_unsupported(value: Any) -> bool:
    return isinstance(value, Unsupported)


def error_class_name(name: str) -> str:
    """NVMLError_NotSupported -> 'NotSupported'."""
    return name.removeprefix("NVMLError_")


def nvml_error_name(exc: BaseException) -> str:
    """The error's NVML name; a bare NVMLError (an unknown code) keeps its code."""
    if type(exc).__name__.startswith("NVMLError_"):
        return error_class_name(type(exc).__name__)
    value = getattr(exc, "value", None)
    return f"{type(exc).__name__} {value}" if value is not None else type(exc).__name__


def return_code_name(nvml: Any, code: int) -> str:
    """An nvmlReturn_t code (a field value's own status) named like the exception it would raise."""
    try:
        return error_class_name(nvml.nvmlExceptionClass(code).__name__)
    except (AttributeError, ValueError):
        return f"NVML error {code}"


def text(value: Any) -> Any:
    """NVML strings come back as bytes from some pynvml functions and str from others."""
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def query(nvml: Any, function: str, *args: Any, convert: Callable[[Any], Any] = text) -> Any:
    """One NVML call; any NVMLError (or a function this pynvml lacks) becomes an unsupported record."""
    fn = getattr(nvml, function, None)
    if fn is None:
        return Unsupported(f"FunctionNotFound (pynvml has no {function})")
    try:
        return convert(fn(*args))
    except nvml.NVMLError as exc:
        return Unsupported(nvml_error_name(exc))


def field(record: Any, convert: Callable[[Any], Any]) -> Any:
    """A value derived from an earlier query, passing an unsupported record through."""
    return record if is_unsupported(record) else convert(record)


def load_nvml(nvml: Any = None) -> tuple[Any, str | None]:
    """The NVML module to use, or None and why not (nvidia-ml-py may not be installed)."""
    if nvml is not None:
        return nvml, None
    try:
        import pynvml
    except ImportError as exc:
        return None, f"pynvml (nvidia-ml-py) not importable: {exc}"
    return pynvml, None


def init_failure_reason(exc: BaseException) -> str:
    """nvmlInit's error in plain words, keeping NVML's own name for searching."""
    name = nvml_error_name(exc)
    return f"{INIT_FAILURES.get(name, f'nvmlInit failed: {exc}')}; nvmlInit raised NVMLError_{name}"


def start_nvml(nvml: Any) -> str | None:
    """nvmlInit; None when it worked, else why not."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return init_failure_reason(exc)
    return None


def stop_nvml(nvml: Any) -> None:
    """nvmlShutdown; a failure here must not lose what was collected."""
    try:
        nvml.nvmlShutdown()
    except nvml.NVMLError:
        pass
