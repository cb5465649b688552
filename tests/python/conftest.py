"""Shared by the pytest files: the build's `strata` command and the repository root."""
import os
import pathlib

import pytest

SOURCE_DIR = pathlib.Path(os.environ.get("STRATA_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))


@pytest.fixture
def strata_cli():
    """The `strata` command built beside the module (set by ctest as STRATA_CLI)."""
    path = os.environ.get("STRATA_CLI")
    if not path:
        pytest.fail("STRATA_CLI is not set: run through ctest (ctest -R python.)")
    return path


@pytest.fixture
def testdata():
    """testdata/ of this repository (real TensorFlow-written files under real/)."""
    return SOURCE_DIR / "testdata"
