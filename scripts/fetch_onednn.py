#!/usr/bin/env python3
"""Puts oneDNN 3.2 from PyPI into a prefix (PREFIX/include, PREFIX/lib), for building gmlp against
it instead of Debian's oneDNN 2.6.3: `make build-onednn3`.

It is the newest oneDNN on PyPI built on GNU OpenMP (onednn-cpu-gomp and its headers,
onednn-devel-cpu-gomp, 2023.2.0), which needs nothing but libgomp; the newer `onednn` wheels are
built on the SYCL runtime and pull in about 630 MB of Intel's runtimes. pip downloads the two
wheels (39 MB), pinned by their SHA-256. Quiet when PREFIX already holds this version; the prefix is
filled under a temporary name and renamed, so an interrupted run leaves nothing half made.

Usage: python scripts/fetch_onednn.py PREFIX   (a Python with pip: make's runs the venv's)
"""
import os
import shutil
import subprocess
import sys
import zipfile

VERSION = "2023.2.0"  # oneDNN 3.2.0
WHEELS = {  # package: SHA-256 of its manylinux1 x86-64 wheel on PyPI
    "onednn-cpu-gomp": "2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb",
    "onednn-devel-cpu-gomp": "9763c69e8c907e119056bd52ad918ca84ac9ba939d130a99dfa95ccca3e5e284",
}
LIBRARY = "libdnnl.so.3.2"


def download(dest):
    """The two wheels into dest, by pip, which checks each against its pinned hash."""
    pins = os.path.join(dest, "requirements.txt")
    with open(pins, "w") as f:
        for package, sha256 in WHEELS.items():
            f.write(f"{package}=={VERSION} --hash=sha256:{sha256}\n")
    print(f"fetch_onednn: downloading oneDNN 3.2 ({', '.join(WHEELS)} {VERSION}, 39 MB) from PyPI", file=sys.stderr)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--require-hashes",
           "--disable-pip-version-check", "--progress-bar", "off", "-q", "-d", dest, "-r", pins]
    if subprocess.run(cmd).returncode != 0:
        sys.exit(f"fetch_onednn: pip download of {', '.join(WHEELS)} {VERSION} failed (its messages above)")
    os.remove(pins)
    return [os.path.join(dest, w) for w in sorted(os.listdir(dest)) if w.endswith(".whl")]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: scripts/fetch_onednn.py PREFIX")
    prefix = sys.argv[1].rstrip("/")
    stamp = os.path.join(prefix, ".version")
    if os.path.isfile(stamp) and open(stamp).read().strip() == VERSION:
        return
    tmp = prefix + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for wheel in download(tmp):
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                # Wheels keep a prefix's files under NAME.data/data/; the library comes three times
                # (a wheel holds no links), so only the versioned file is taken and linked below.
                parts = name.split("/")
                if len(parts) < 4 or parts[1] != "data" or not parts[0].endswith(".data"):
                    continue
                rel = "/".join(parts[2:])
                if rel.startswith("lib/libdnnl.so") and rel != f"lib/{LIBRARY}":
                    continue
                if not (rel.startswith("include/") or rel.startswith("lib/")):
                    continue
                dest = os.path.join(tmp, rel)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                with z.open(name) as src, open(dest, "wb") as out:
                    shutil.copyfileobj(src, out)
        os.remove(wheel)
    lib = os.path.join(tmp, "lib")
    os.chmod(os.path.join(lib, LIBRARY), 0o755)
    os.symlink(LIBRARY, os.path.join(lib, "libdnnl.so.3"))
    os.symlink(LIBRARY, os.path.join(lib, "libdnnl.so"))
    with open(os.path.join(tmp, ".version"), "w") as f:
        f.write(VERSION + "\n")
    shutil.rmtree(prefix, ignore_errors=True)
    os.rename(tmp, prefix)
    print(f"fetch_onednn: oneDNN {VERSION} (3.2) in {prefix}/", file=sys.stderr)


if __name__ == "__main__":
    main()
