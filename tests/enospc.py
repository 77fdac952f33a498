"""A full disk for one process, without privileges: an ``LD_PRELOAD`` shim whose ``write``,
``pwrite`` and ``pwrite64`` fail with ``ENOSPC`` — what the kernel answers when a file system is
full — for files under a directory, while a flag file exists.

A tmpfs of a few megabytes would be the real thing, but mounting one needs privileges a test
machine may not grant; SQLite sees the same errno either way (``SQLITE_FULL``, "database or disk
is full"). The shim is compiled with the machine's C compiler the first time it is needed.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from dataclasses import dataclass

SOURCE = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

static const char *directory, *flag;

__attribute__((constructor)) static void init(void) {
    directory = getenv("ENOSPC_DIRECTORY");
    flag = getenv("ENOSPC_FLAG");
}

/* Whether fd is a file under the directory, while the flag file exists. */
static int full(int fd) {
    struct stat st;
    char link[64], path[4096];
    ssize_t n;
    if (!directory || !flag || stat(flag, &st) != 0) return 0;
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof path - 1);
    if (n < 0) return 0;
    path[n] = 0;
    return strncmp(path, directory, strlen(directory)) == 0;
}

#define REAL(name) static __typeof__(&name) real; if (!real) real = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t count) {
    REAL(write);
    if (full(fd)) { errno = ENOSPC; return -1; }
    return real(fd, buf, count);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t offset) {
    REAL(pwrite);
    if (full(fd)) { errno = ENOSPC; return -1; }
    return real(fd, buf, count, offset);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off64_t offset) {
    REAL(pwrite64);
    if (full(fd)) { errno = ENOSPC; return -1; }
    return real(fd, buf, count, offset);
}
"""


class NoCompiler(RuntimeError):
    """No C compiler to build the shim with (a python machine has gcc; install it)."""


@dataclass(frozen=True)
class FullDisk:
    """The environment that makes a process's ``directory`` fill up while ``flag`` exists."""

    library: pathlib.Path
    directory: pathlib.Path
    flag: pathlib.Path

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "LD_PRELOAD": str(self.library),
            "ENOSPC_DIRECTORY": str(self.directory.resolve()),
            "ENOSPC_FLAG": str(self.flag),
        }

    def fill(self) -> None:
        self.flag.touch()

    def free(self) -> None:
        self.flag.unlink(missing_ok=True)


def build(into: pathlib.Path) -> pathlib.Path:
    """Compile the shim into ``into``/enospc.so."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise NoCompiler("the full-disk test compiles an LD_PRELOAD shim and finds no cc or gcc")
    source = into / "enospc.c"
    source.write_text(SOURCE)
    library = into / "enospc.so"
    subprocess.run(
        [compiler, "-shared", "-fPIC", "-O1", "-o", str(library), str(source), "-ldl"],
        check=True,
        capture_output=True,
        text=True,
    )
    return library
