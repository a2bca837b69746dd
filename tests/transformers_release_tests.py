"""transformers' own common model tests, taken at test time from the source release of the installed version.

The tests are never copied into this repository: ``pip download`` fetches the sdist of the installed transformers
from the package registry once, and its ``tests/*.py`` are unpacked into a cache folder as the package
``transformers_sdist_tests``. The sdist ships ``test_modeling_common.py`` and ``test_configuration_common.py``
but not three modules they import (``exporters/test_export.py``, ``generation/test_utils.py``,
``utils/test_configuration_utils.py``); those imports get stand-ins that add no tests (``MISSING_FROM_RELEASE``),
and the tests that need them are listed as skipped where the suite runs them.
"""

import importlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import types
from pathlib import Path

import transformers

PACKAGE = "transformers_sdist_tests"
CACHE = Path(os.environ.get("VANILLA_TEST_CACHE", Path.home() / ".cache" / "vanilla-transformer"))

# Module of the release's test tree -> the names it must provide. Each stand-in is an empty mixin (or an empty
# mapping), so it adds no test and removes none of ModelTesterMixin's own.
MISSING_FROM_RELEASE = {
    "exporters.test_export": {"ExportTesterMixin": type("ExportTesterMixin", (), {})},
    "generation.test_utils": {"GenerationTesterMixin": type("GenerationTesterMixin", (), {})},
    "utils.test_configuration_utils": {"config_common_kwargs": {}},
}


def release_tests_dir(version: str = transformers.__version__) -> Path:
    """The folder holding ``transformers_release_tests`` for ``version``; downloads the sdist the first time.
    Raises RuntimeError (with pip's message) when the registry cannot be reached."""
    root = CACHE / f"transformers-{version}-tests"
    if (root / PACKAGE / "test_modeling_common.py").is_file():
        return root
    with tempfile.TemporaryDirectory() as download:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--no-binary",
                ":all:",
                "--quiet",
                "--dest",
                download,
                f"transformers=={version}",
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        archives = list(Path(download).glob("transformers-*.tar.gz"))
        if result.returncode or not archives:
            raise RuntimeError(f"pip could not download the transformers {version} sdist: {result.stderr[-500:]}")
        CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=CACHE))
        with tarfile.open(archives[0]) as archive:
            members = [m for m in archive.getmembers() if m.name.startswith(f"transformers-{version}/tests/")]
            archive.extractall(staging, members=members, filter="data")
        package = staging / PACKAGE
        (staging / f"transformers-{version}" / "tests").rename(package)
        (package / "__init__.py").touch()
        try:
            staging.rename(root)  # atomic: a half-unpacked folder is never taken for the cache
        except OSError:  # another process unpacked it first
            shutil.rmtree(staging)
    return root


def import_release_tests():
    """(ModelTesterMixin, ConfigTester, ids_tensor) of the installed transformers' release tests."""
    root = release_tests_dir()
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    for module, names in MISSING_FROM_RELEASE.items():
        parent = PACKAGE
        for part in module.split(".")[:-1]:
            parent = f"{parent}.{part}"
            sys.modules.setdefault(parent, types.ModuleType(parent))
        stand_in = types.ModuleType(f"{PACKAGE}.{module}")
        stand_in.__dict__.update(names)
        sys.modules.setdefault(stand_in.__name__, stand_in)
    modeling = importlib.import_module(f"{PACKAGE}.test_modeling_common")
    configuration = importlib.import_module(f"{PACKAGE}.test_configuration_common")
    return modeling.ModelTesterMixin, configuration.ConfigTester, modeling.ids_tensor
