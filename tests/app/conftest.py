"""Storage and API tests run on both backends: the storage is what they test."""

import pytest

from tests.conftest import BACKENDS, databases_of_each_backend

databases = pytest.fixture(scope="session", params=BACKENDS, name="databases")(databases_of_each_backend)
