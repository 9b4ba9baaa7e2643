"""What a test sees of other processes, through /proc (Linux)."""

from pathlib import Path

HAS_PROC = Path("/proc/self/task").is_dir()


def alive(pid: int) -> bool:
    """Running or sleeping: neither gone nor a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []
