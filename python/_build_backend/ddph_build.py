"""The PEP 517 build backend of ``pip install ./python``: writes the wheel (or the sdist) of the
pure-Python packages straight into the folder pip names, and nothing anywhere else.

setuptools, the usual backend, builds in the source tree (``build/``, ``*.egg-info``: a read-only
checkout fails) and needs the ``wheel`` package for ``bdist_wheel`` before setuptools 70.1 (the
``python3`` of a pyenv or a plain venv has none: "invalid command 'bdist_wheel'"). This backend
needs nothing beyond the standard library (``tomllib``; ``tomli`` on Python < 3.11), so pip's
isolated build installs nothing and works offline. What goes into the wheel is pyproject.toml's
``[project]`` table and the packages listed in ``[tool.ddph]``.
"""

import base64
import csv
import hashlib
import io
import os
import tarfile
import zipfile

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZIP_DATE = (1980, 1, 1, 0, 0, 0)  # fixed: the same sources make the same wheel
SKIPPED_DIRS = ("__pycache__",)
SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _toml_module():
    try:
        import tomllib
        return tomllib
    except ImportError:  # Python < 3.11
        import tomli
        return tomli


def _pyproject():
    with open(os.path.join(SOURCE, "pyproject.toml"), "rb") as f:
        return _toml_module().load(f)


def _project():
    return _pyproject()["project"]


def _packages():
    return _pyproject()["tool"]["ddph"]["packages"]


def _dist_name(project):
    return project["name"].replace("-", "_")


def _package_files():
    """(path inside the wheel, path on disk) of every file of the packages, sorted."""
    files = []
    for package in _packages():
        for folder, dirs, names in os.walk(os.path.join(SOURCE, package)):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS)
            for name in sorted(names):
                if name.endswith(SKIPPED_SUFFIXES):
                    continue
                path = os.path.join(folder, name)
                files.append((os.path.relpath(path, SOURCE).replace(os.sep, "/"), path))
    return files


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + project["version"],
             "Summary: " + project.get("description", "")]
    if "requires-python" in project:
        lines.append("Requires-Python: " + project["requires-python"])
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s ; extra == "%s"' % (d, extra) for d in deps]
    return "\n".join(lines) + "\n"


def _entry_points(project):
    out = []
    for group, points in sorted(project.get("entry-points", {}).items()):
        out.append("[%s]" % group)
        out += ["%s = %s" % (name, target) for name, target in sorted(points.items())]
        out.append("")
    return "\n".join(out)


def _dist_info_files(project):
    files = {"METADATA": _metadata(project),
             "WHEEL": "Wheel-Version: 1.0\nGenerator: ddph_build\nRoot-Is-Purelib: true\n"
                      "Tag: py3-none-any\n",
             "top_level.txt": "".join(p + "\n" for p in _packages())}
    entry_points = _entry_points(project)
    if entry_points:
        files["entry_points.txt"] = entry_points
    return files


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, "sha256=" + digest, str(len(data))]


def _write_wheel(wheel_directory, contents):
    """contents: (name inside the wheel, bytes); adds the dist-info and RECORD; returns the name."""
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    dist_info = base + ".dist-info"
    contents = list(contents) + [(dist_info + "/" + name, text.encode())
                                 for name, text in sorted(_dist_info_files(project).items())]
    record = io.StringIO()
    writer = csv.writer(record, lineterminator="\n")
    for name, data in contents:
        writer.writerow(_record_line(name, data))
    writer.writerow([dist_info + "/RECORD", "", ""])
    contents.append((dist_info + "/RECORD", record.getvalue().encode()))
    wheel_name = base + "-py3-none-any.whl"
    partial = os.path.join(wheel_directory, wheel_name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in contents:
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    os.replace(partial, os.path.join(wheel_directory, wheel_name))
    return wheel_name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def get_requires_for_build_wheel(config_settings=None):
    try:
        import tomllib  # noqa: F401
        return []
    except ImportError:
        return ["tomli"]


get_requires_for_build_editable = get_requires_for_build_wheel
get_requires_for_build_sdist = get_requires_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, [(name, _read(path)) for name, path in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """``pip install -e ./python``: a .pth file that puts this source folder on sys.path."""
    pth = "%s.pth" % _dist_name(_project())
    return _write_wheel(wheel_directory, [(pth, (SOURCE + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    base = "%s-%s" % (_dist_name(project), project["version"])
    names = ["pyproject.toml", "_build_backend/ddph_build.py"] + [n for n, _ in _package_files()]
    partial = os.path.join(sdist_directory, base + ".tar.gz.part")
    with tarfile.open(partial, "w:gz") as sdist:
        for name in names:
            data = _read(os.path.join(SOURCE, name))
            info = tarfile.TarInfo("%s/%s" % (base, name))
            info.size, info.mode = len(data), 0o644
            sdist.addfile(info, io.BytesIO(data))
        info = tarfile.TarInfo(base + "/PKG-INFO")
        data = _metadata(project).encode()
        info.size, info.mode = len(data), 0o644
        sdist.addfile(info, io.BytesIO(data))
    os.replace(partial, os.path.join(sdist_directory, base + ".tar.gz"))
    return base + ".tar.gz"
