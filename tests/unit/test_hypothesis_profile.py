"""Property tests are deterministic: tests/conftest.py loads a derandomized profile without a database."""
from hypothesis import settings


def test_the_suite_profile_is_derandomized_without_a_database():
    profile = settings.get_profile("gpuops")
    assert profile.derandomize is True
    assert profile.database is None  # no failure saved by an earlier run is replayed
    assert profile.print_blob is True  # a failure says how to reproduce it


def test_it_is_the_profile_in_effect_unless_another_is_asked_for(pytestconfig):
    asked = pytestconfig.getoption("hypothesis_profile", default=None)
    if asked is None:
        assert settings.default.derandomize is True
        assert settings.default.database is None
    else:  # pytest --hypothesis-profile=explore: random examples on purpose
        assert settings.default == settings.get_profile(asked)
