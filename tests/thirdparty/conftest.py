"""Makes the real-server fixture visible to the tests in this folder."""

from thirdparty.fixture import thirdparty_server  # noqa: F401  # a fixture, used by name
