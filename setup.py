"""perftracker's build backend (PEP 517), used by `pip install --no-build-isolation .`.

Why not setuptools: installing must work offline, and the wheel command setuptools needs
comes from the `wheel` package, which not every Python here has. A wheel is a zip file
with a few metadata files, so this backend writes it directly after the project's own
CMake build has made the C parts:
  perftracker/_perftracker*.so  the collector extension, built against the installing
                                interpreter's headers (-DPython3_EXECUTABLE)
  perftracker/bin/perftracker   the CLI, which workers spawn to summarize their traces
                                and which the `perftracker` / `c4d_perftracker` commands run
Build files go to build-pip/, away from the `make` trees. Needs cmake, a C compiler,
python3-dev, libzstd-dev, zlib1g-dev and nettle-dev (scripts/install-deps.sh --build).

Direct use: python3 setup.py [WHEEL_DIR]   (builds the wheel into WHEEL_DIR, default dist/)
"""
import base64
import hashlib
import os
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.abspath(__file__))
BUILD_DIR = os.path.join(ROOT, "build-pip", "cmake")
NAME, VERSION = "perftracker", "0.1.0"
PACKAGES = ("perftracker", "c4d_perftracker_collector")
PACKAGE_DIRS = PACKAGES + ("perftracker/run_boot",)  # run_boot: `perftracker run`'s sitecustomize
SCRIPTS = {"perftracker": "perftracker.cli:main", "c4d_perftracker": "perftracker.cli:main"}


def _cmake_build():
    subprocess.check_call(["cmake", "-S", ROOT, "-B", BUILD_DIR, "-DCMAKE_BUILD_TYPE=Release",
                           "-DPython3_EXECUTABLE=" + sys.executable], stdout=sys.stderr)
    subprocess.check_call(["cmake", "--build", BUILD_DIR, "-j%d" % (os.cpu_count() or 2),
                           "--target", "pt_python_module", "perftracker-cli"], stdout=sys.stderr)
    built = os.path.join(BUILD_DIR, "python", "perftracker")
    modules = [f for f in os.listdir(built) if f.startswith("_perftracker") and f.endswith(".so")]
    if len(modules) != 1:
        raise RuntimeError("CMake did not produce the extension in %s" % built)
    return os.path.join(built, modules[0]), os.path.join(BUILD_DIR, "bin", "perftracker")


def _wheel_tag():
    interpreter = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (interpreter, interpreter, platform)


def _files(extension, cli):
    """(path in the wheel, path on disk, executable) for everything installed."""
    for package in PACKAGE_DIRS:
        source = os.path.join(ROOT, "python", package)
        for name in sorted(os.listdir(source)):
            if name.endswith(".py"):
                yield "%s/%s" % (package, name), os.path.join(source, name), False
    yield "perftracker/" + os.path.basename(extension), extension, False
    yield "perftracker/bin/perftracker", cli, True


def _metadata_files(tag):
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    readme = open(os.path.join(ROOT, "README.md")).read() if os.path.exists(os.path.join(ROOT, "README.md")) else ""
    metadata = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: Online performance troubleshooting "
                "for PyTorch training: in-process collector and analysis CLI\nLicense: MIT\n"
                "Requires-Python: >=3.8\nDescription-Content-Type: text/markdown\n\n%s" % (NAME, VERSION, readme))
    wheel = "Wheel-Version: 1.0\nGenerator: perftracker setup.py\nRoot-Is-Purelib: false\nTag: %s\n" % tag
    entry_points = "[console_scripts]\n" + "".join("%s = %s\n" % item for item in SCRIPTS.items())
    return dist_info, {
        dist_info + "/METADATA": metadata,
        dist_info + "/WHEEL": wheel,
        dist_info + "/entry_points.txt": entry_points,
        dist_info + "/top_level.txt": "".join(p + "\n" for p in PACKAGES),
    }


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (name, digest, len(data))


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    extension, cli = _cmake_build()
    tag = _wheel_tag()
    filename = "%s-%s-%s.whl" % (NAME, VERSION, tag)
    dist_info, metadata = _metadata_files(tag)
    record = []
    os.makedirs(wheel_directory, exist_ok=True)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as whl:
        for arcname, path, executable in _files(extension, cli):
            with open(path, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if executable else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            whl.writestr(info, data)
            record.append(_record_line(arcname, data))
        for arcname, text in metadata.items():
            whl.writestr(arcname, text)
            record.append(_record_line(arcname, text.encode()))
        record.append(dist_info + "/RECORD,,\n")
        whl.writestr(dist_info + "/RECORD", "".join(record))
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "dist")
    print(os.path.join(out, build_wheel(out)))
