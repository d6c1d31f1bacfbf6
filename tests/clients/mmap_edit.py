#!/usr/bin/env python3
"""Edits a file through a shared memory map, as an editor or a database might (issue 49, item 5).

    python mmap_edit.py FILE

Maps FILE shared and reads lines from stdin, each `OLD NEW` (two words of equal length): the
first OLD in the file is overwritten with NEW in place, through the map (no write(2), no
msync). After each edit it prints one JSON line: {"mtime_ns": ..., "ctime_ns": ...} as stat
sees the file then. The first write to a clean page moves the file's times; a later write into
the same page while it is still dirty moves neither, which is what the test looks for. Exits
when stdin closes, without msync (the kernel writes the page back in its own time).
"""

import json
import mmap
import os
import sys


def main():
    path = sys.argv[1]
    with open(path, "r+b") as f:
        m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        for line in sys.stdin:
            old, new = line.split()
            if len(old) != len(new):
                raise SystemExit(f"{old!r} and {new!r} differ in length")
            at = m.find(old.encode())
            if at < 0:
                raise SystemExit(f"{old!r} is not in {path}")
            m[at:at + len(new)] = new.encode()
            st = os.stat(path)
            print(json.dumps({"mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}), flush=True)


if __name__ == "__main__":
    main()
