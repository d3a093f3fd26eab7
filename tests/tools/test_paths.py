"""Reading a kernel file named by a client: roots, names, file kinds and sizes, all refused in clear words."""

from __future__ import annotations

import errno
import os
import time
from pathlib import Path

import pytest

from tools.errors import ToolInputError
from tools.runtime import resolve_source_file

LIMIT = 1024


@pytest.fixture
def root(tmp_path: Path) -> Path:
    d = tmp_path / "kernels"
    d.mkdir()
    return d


def _refused(path: str, roots: list[Path], max_bytes: int = LIMIT) -> str:
    with pytest.raises(ToolInputError) as info:
        resolve_source_file(path, roots, max_bytes)
    message = str(info.value)
    assert "Errno" not in message and "Traceback" not in message, message
    return message


def test_reads_a_file_inside_the_root(root: Path) -> None:
    (root / "k.py").write_text("x = 1\n")
    assert resolve_source_file(str(root / "k.py"), [root], LIMIT) == "x = 1\n"
    assert resolve_source_file("k.py", [root], LIMIT) == "x = 1\n"  # relative to the first root


def test_no_roots_names_the_flag_and_the_variable(root: Path) -> None:
    (root / "k.py").write_text("x = 1\n")
    message = _refused(str(root / "k.py"), [])
    assert "--allow-path" in message and "ANVIL_ALLOWED_PATHS" in message and "source instead" in message


def test_size_is_checked_before_reading(root: Path) -> None:
    (root / "exact.py").write_bytes(b"#" * LIMIT)
    assert len(resolve_source_file("exact.py", [root], LIMIT)) == LIMIT
    (root / "over.py").write_bytes(b"#" * (LIMIT + 1))
    assert "the limit (max_source_bytes) is 1024" in _refused("over.py", [root])
    with open(root / "huge.py", "wb") as f:  # sparse: 1.5 GB that would take seconds to read
        f.truncate(1_500_000_000)
    start = time.perf_counter()
    assert "1500000000 bytes" in _refused("huge.py", [root])
    assert time.perf_counter() - start < 0.5


def test_only_regular_files(root: Path, tmp_path: Path) -> None:
    os.mkfifo(root / "pipe.py")
    (root / "dir.py").mkdir()
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    (root / "zero").symlink_to("/dev/zero")
    start = time.perf_counter()
    assert "FIFO" in _refused("pipe.py", [root])  # and no wait for a writer
    assert time.perf_counter() - start < 0.5
    assert "is a directory" in _refused("dir.py", [root])
    assert "loop of symbolic links" in _refused("loop_a", [root])
    assert "outside the allowed directories" in _refused("zero", [root])
    assert "does not exist" in _refused("missing.py", [root])
    (root / "k.py").write_text("x = 1\n")
    assert "has a component that is not a directory" in _refused("k.py/x", [root])
    # Even an operator who allows / never exposes the kernel's pseudo-files.
    assert "system file" in _refused("/proc/self/environ", [Path("/")])
    assert "system file" in _refused("/dev/zero", [Path("/")])


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files regardless of their mode")
def test_permission_denied(root: Path) -> None:
    secret = root / "secret.py"
    secret.write_text("x = 1\n")
    secret.chmod(0)
    assert "permission denied" in _refused("secret.py", [root])


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("a" * 300 + ".py", "a file name is at most 255 bytes"),
        ("d/" * 3000 + "k.py", "a path is at most 4096 bytes"),
        ("k\x00.py", "NUL byte"),
        ("k\udcff.py", "not valid UTF-8"),
        ("", "is empty"),
        ("~nosuchuser12345/k.py", "no known home directory"),
    ],
)
def test_bad_names(root: Path, name: str, needle: str) -> None:
    assert needle in _refused(name, [root])


def test_non_utf8_content(root: Path) -> None:
    (root / "latin1.py").write_bytes(b"# caf\xe9\n")
    assert "not UTF-8 text (byte 5 is invalid)" in _refused("latin1.py", [root])


def test_os_errors_become_sentences() -> None:
    from tools.paths import os_error

    assert "permission denied" in str(os_error(PermissionError(errno.EACCES, "denied"), "source_file", "k.py"))
    odd = str(os_error(OSError(errno.EIO, "io"), "source_file", "k.py"))
    assert odd.startswith("source_file 'k.py' cannot be used (EIO")
