#!/usr/bin/env python3
"""The fresh-machine check behind `tests/setup.sh --check-clean`.

A test that uses a tool installed by hand passes on the machine where it was installed and fails
on a fresh one (issue 14: libprotobuf-dev). This compares what this machine has with what a fresh
machine has (tests/fresh-machine.txt) plus what tests/setup.sh installs, and fails naming every
package that is in neither:

- Debian packages: those setup installs count with everything they depend on (Depends and
  Pre-Depends, never Recommends, since setup installs with --no-install-recommends);
- rustup targets, and programs `cargo install` put in ~/.cargo/bin;
- pip packages of the system python3, and global npm packages.

XDST_CHECK_CLEAN_ALLOW="name ..." names packages a developer installed for work by hand that no
test uses (a profiler, say); each is reported as allowed rather than failing.
"""

import argparse
import os
import re
import subprocess
import sys

RUSTUP_PROXIES = {
    "cargo", "cargo-clippy", "cargo-fmt", "cargo-miri", "clippy-driver", "rls", "rust-analyzer",
    "rust-gdb", "rust-gdbgui", "rust-lldb", "rustc", "rustdoc", "rustfmt", "rustup",
}


def run(*cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def dpkg_installed():
    """name -> (depends names, provides names), for every installed Debian package."""
    out = run("dpkg-query", "-W", "-f=${Package}\t${Status}\t${Depends}\t${Pre-Depends}\t${Provides}\n")
    pkgs = {}
    for line in out.splitlines():
        name, status, dep, predep, provides = (line.split("\t") + [""] * 5)[:5]
        if not status.endswith(" installed"):
            continue
        deps = set()
        for clause in f"{dep},{predep}".split(","):
            # "a (>= 1) | b:any" -> every alternative: whichever is installed satisfies it.
            for alt in clause.split("|"):
                alt = re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip().split(":")[0]
                if alt:
                    deps.add(alt)
        prov = {re.sub(r"\(.*?\)", "", p).strip() for p in provides.split(",") if p.strip()}
        pkgs[name] = (deps, prov)
    return pkgs


def closure(roots, pkgs):
    providers = {}
    for name, (_, prov) in pkgs.items():
        for p in prov:
            providers.setdefault(p, set()).add(name)
    seen, todo = set(), list(roots)
    while todo:
        n = todo.pop()
        for real in ({n} if n in pkgs else set()) | providers.get(n, set()):
            if real not in seen:
                seen.add(real)
                todo.extend(pkgs[real][0])
    return seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fresh", required=True)
    ap.add_argument("--apt", default="")
    ap.add_argument("--rustup-targets", default="")
    args = ap.parse_args()

    fresh = {"apt": set(), "pip": set(), "npm": set()}
    with open(args.fresh) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                kind, name = line.split()
                fresh[kind].add(name)
    allowed = set(os.environ.get("XDST_CHECK_CLEAN_ALLOW", "").split())
    declared_apt = args.apt.split()

    pkgs = dpkg_installed()
    provided = closure(fresh["apt"], pkgs) | closure(declared_apt, pkgs)
    extra = {"Debian package": sorted(set(pkgs) - provided)}

    host = run("rustc", "-vV")
    host = next((l.split()[1] for l in host.splitlines() if l.startswith("host:")), "")
    targets = set(run("rustup", "target", "list", "--installed").split())
    extra["rustup target"] = sorted(targets - {host} - set(args.rustup_targets.split()))
    cargo_bin = os.path.join(os.environ.get("CARGO_HOME", os.path.expanduser("~/.cargo")), "bin")
    installed_bins = set(os.listdir(cargo_bin)) if os.path.isdir(cargo_bin) else set()
    extra["program in ~/.cargo/bin"] = sorted(installed_bins - RUSTUP_PROXIES)

    pip = run(sys.executable, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check")
    pip_names = {re.split("[=@ ]", l)[0].lower().replace("_", "-") for l in pip.splitlines() if l.strip()}
    fresh_pip = {n.replace("_", "-") for n in fresh["pip"]}
    extra["pip package (system python3)"] = sorted(pip_names - fresh_pip)
    npm = run("npm", "ls", "-g", "--depth=0", "--parseable")
    npm_names = {os.path.relpath(p, p.split("node_modules")[0] + "node_modules") for p in npm.split() if "node_modules" in p}
    extra["global npm package"] = sorted(npm_names - fresh["npm"])

    print(f"[check-clean] {len(declared_apt)} Debian packages from tests/setup.sh ({len(provided & set(pkgs))} with "
          f"their dependencies and the fresh machine's); {len(pkgs)} installed")
    failed = []
    for kind, names in extra.items():
        for n in names:
            if n in allowed:
                print(f"[check-clean] allowed by XDST_CHECK_CLEAN_ALLOW: {kind} {n}")
            else:
                failed.append(f"{kind} {n}")
    if failed:
        print("[check-clean] FAILED: this machine has what a fresh machine lacks and tests/setup.sh does not install:")
        for f in failed:
            print(f"    {f}")
        print("  A test that uses one of these passes here and fails on a fresh machine. Either add it to the lists at the\n"
              "  top of tests/setup.sh (if a test uses it), or remove it (apt-get remove / pip uninstall / npm rm -g), or,\n"
              "  for a tool no test uses, name it in XDST_CHECK_CLEAN_ALLOW.")
        return 1
    print("[check-clean] ok: nothing on this machine beyond a fresh machine and what tests/setup.sh installs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
