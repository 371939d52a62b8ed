"""``crnn-fonts`` / ``tools/fonts.py``: the font sets recipes draw with, what of them is
installed, and the command that installs the rest.

    crnn-fonts                 # every set: each face, its style, found or missing
    crnn-fonts zh              # the Chinese set
    crnn-fonts --install zh    # install its missing packages (apt-get; sudo when not root)

Exit codes: 0 every face of the asked sets is installed (or was just installed), 1 some
are missing, 2 bad arguments or the install failed.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys

from crnn.cli import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, Parser
from crnn.data.synth.fontsets import FONT_ROOTS, FoundSet, resolve_font_set, set_names


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="crnn-fonts",
        description="List the font sets that recipes name (data.synth.font_sets), which of "
        "their faces are installed, and install the missing ones (Debian/Ubuntu packages). "
        f"Faces are looked for under {', '.join(FONT_ROOTS)}.",
        epilog="Exit code 0: all faces installed; 1: some missing; 2: bad arguments or a "
        "failed install.",
    )
    p.add_argument("sets", nargs="*", help=f"set names (default: all): {', '.join(set_names())}")
    p.add_argument(
        "--install",
        action="store_true",
        help="install the missing packages with apt-get (through sudo when not root)",
    )
    return p


def describe(found: FoundSet) -> str:
    lines = [
        f"font set {found.name!r}: {len(found.faces)} of "
        f"{len(found.faces) + len(found.missing)} faces installed"
    ]
    for face, path in found.faces:
        lines.append(f"  found    {face.style:<6} {face.name:<32} {path}")
    for face in found.missing:
        lines.append(f"  missing  {face.style:<6} {face.name:<32} (package {face.package})")
    if found.missing:
        lines.append(f"install the missing ones with: {found.install_command()}")
    return "\n".join(lines)


def install(found: FoundSet) -> int:
    """Run apt-get for the set's missing packages; the exit code of the install."""
    if not shutil.which("apt-get"):
        print(
            f"apt-get not found: install the faces of set {found.name!r} with your system's "
            f"package manager ({', '.join(found.missing_packages)} on Debian/Ubuntu), or "
            "name a font folder with data.synth.font_dirs",
            file=sys.stderr,
        )
        return EXIT_USAGE
    cmd = found.install_command().split()
    if cmd[0] == "sudo" and not shutil.which("sudo"):
        print("not root and no sudo: run as root: " + " ".join(cmd[1:]), file=sys.stderr)
        return EXIT_USAGE
    print("running: " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    names = args.sets or list(set_names())
    unknown = [n for n in names if n not in set_names()]
    if unknown:
        print(
            f"crnn-fonts: unknown font set {unknown[0]!r}: expected one of "
            f"{', '.join(set_names())}",
            file=sys.stderr,
        )
        return EXIT_USAGE
    missing = False
    for name in names:
        found = resolve_font_set(name)
        if args.install and found.missing:
            rc = install(found)
            if rc != 0:
                print(f"crnn-fonts: the install exited with {rc}", file=sys.stderr)
                return EXIT_USAGE
            from crnn.data.synth import fontsets

            fontsets._files_by_name.cache_clear()
            found = resolve_font_set(name)
        print(describe(found))
        missing = missing or bool(found.missing)
    return EXIT_FAILURE if missing else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
