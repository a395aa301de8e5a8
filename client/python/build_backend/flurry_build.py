"""flurry_build — the PEP 517 build backend of flurry_client, in-tree (pyproject.toml's
backend-path) and standard library only, so that `pip install ./client/python` and
`pip wheel ./client/python` need nothing from a package index: pip's isolated build
environment has nothing to install (requires = []), which works offline as well as online.
setuptools would need itself and `wheel` fetched into that environment (Debian 12's venv has
no `wheel`), and would leave build/ and *.egg-info in the source tree.

What it builds, from pyproject.toml's [project] table (name, version, description, readme,
requires-python, dependencies, classifiers) and the package directory flurry_client/:
  * a wheel, py3-none-any: every file of flurry_client/ but caches (py.typed included), and
    the .dist-info (METADATA 2.1 with the README as description, WHEEL, RECORD with sha256);
  * an sdist: pyproject.toml, README.md, this backend and flurry_client/, with PKG-INFO;
  * an editable wheel (pip install -e): a .pth file naming this directory.
Archives are reproducible: sorted entries, fixed modes, timestamps from SOURCE_DATE_EPOCH
(else 1980-01-01). Nothing is written outside the directory pip names.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import re
import tarfile
import time
import tomllib
import zipfile
from typing import Any

ConfigSettings = dict[str, Any] | None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "flurry_client"
_SKIPPED = re.compile(r"(^|/)(__pycache__|\.[^/]*)(/|$)|\.py[co]$")


def _project() -> dict[str, Any]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as file:
        project: dict[str, Any] = tomllib.load(file)["project"]
    return project


def _names() -> tuple[str, str]:
    """(the name for file names: PEP 427/625 normalized, the version)."""
    project = _project()
    return re.sub(r"[-_.]+", "_", project["name"]).lower(), project["version"]


def _metadata() -> bytes:
    project = _project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project.get('description', '')}",
    ]
    if "requires-python" in project:
        lines.append(f"Requires-Python: {project['requires-python']}")
    lines += [f"Requires-Dist: {requirement}" for requirement in project.get("dependencies", [])]
    lines += [f"Classifier: {classifier}" for classifier in project.get("classifiers", [])]
    description = ""
    if "readme" in project:
        lines.append("Description-Content-Type: text/markdown; charset=UTF-8")
        with open(os.path.join(ROOT, project["readme"]), encoding="utf-8") as file:
            description = file.read()
    return ("\n".join(lines) + "\n\n" + description).encode("utf-8")


def _dist_info_files(tag_line: str) -> dict[str, bytes]:
    name, version = _names()
    return {
        "METADATA": _metadata(),
        "WHEEL": (f"Wheel-Version: 1.0\nGenerator: flurry_build {version}\n"
                  f"Root-Is-Purelib: true\nTag: {tag_line}\n").encode(),
        "top_level.txt": f"{PACKAGE}\n".encode(),
    }


def _package_files() -> dict[str, bytes]:
    files = {}
    for directory, subdirectories, names in os.walk(os.path.join(ROOT, PACKAGE)):
        subdirectories[:] = sorted(d for d in subdirectories if not _SKIPPED.search(d))
        for file_name in names:
            path = os.path.join(directory, file_name)
            relative = os.path.relpath(path, ROOT).replace(os.sep, "/")
            if not _SKIPPED.search(relative):
                with open(path, "rb") as file:
                    files[relative] = file.read()
    return files


def _epoch() -> int:
    """SOURCE_DATE_EPOCH, else 1980-01-01 (the earliest a zip file can say)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "315532800")), 315532800)


def _timestamp() -> tuple[int, int, int, int, int, int]:
    year, month, day, hour, minute, second = time.gmtime(_epoch())[:6]
    return year, month, day, hour, minute, second


def _write_wheel(directory: str, files: dict[str, bytes]) -> str:
    name, version = _names()
    dist_info = f"{name}-{version}.dist-info"
    for file_name, content in _dist_info_files("py3-none-any").items():
        files[f"{dist_info}/{file_name}"] = content
    record = []
    for path, content in sorted(files.items()):
        digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=")
        record.append(f"{path},sha256={digest.decode()},{len(content)}")
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel_name = f"{name}-{version}-py3-none-any.whl"
    stamp = _timestamp()
    with zipfile.ZipFile(os.path.join(directory, wheel_name), "w", zipfile.ZIP_DEFLATED) as wheel:
        # RECORD last, as the wheel spec recommends; everything else in order.
        for path in sorted(files, key=lambda p: (p.endswith("/RECORD"), p)):
            info = zipfile.ZipInfo(path, stamp)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, files[path])
    return wheel_name


# ---- PEP 517 / PEP 660 hooks ----

def get_requires_for_build_wheel(config_settings: ConfigSettings = None) -> list[str]:
    return []


def get_requires_for_build_sdist(config_settings: ConfigSettings = None) -> list[str]:
    return []


def get_requires_for_build_editable(config_settings: ConfigSettings = None) -> list[str]:
    return []


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: ConfigSettings = None) -> str:
    name, version = _names()
    dist_info = f"{name}-{version}.dist-info"
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    for file_name, content in _dist_info_files("py3-none-any").items():
        with open(os.path.join(metadata_directory, dist_info, file_name), "wb") as file:
            file.write(content)
    return dist_info


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: ConfigSettings = None,
                metadata_directory: str | None = None) -> str:
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory: str, config_settings: ConfigSettings = None,
                   metadata_directory: str | None = None) -> str:
    return _write_wheel(wheel_directory, {f"{PACKAGE}_editable.pth": f"{ROOT}\n".encode()})


def build_sdist(sdist_directory: str, config_settings: ConfigSettings = None) -> str:
    name, version = _names()
    base = f"{name}-{version}"
    files = {**_package_files(), "PKG-INFO": _metadata()}
    for relative in ("pyproject.toml", "README.md", "build_backend/flurry_build.py"):
        with open(os.path.join(ROOT, relative), "rb") as file:
            files[relative] = file.read()
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w", format=tarfile.PAX_FORMAT) as sdist:
        for path in sorted(files):
            info = tarfile.TarInfo(f"{base}/{path}")
            info.size, info.mode, info.mtime = len(files[path]), 0o644, _epoch()
            sdist.addfile(info, io.BytesIO(files[path]))
    sdist_name = f"{base}.tar.gz"
    with open(os.path.join(sdist_directory, sdist_name), "wb") as file:
        file.write(gzip.compress(archive.getvalue(), mtime=_epoch()))
    return sdist_name
