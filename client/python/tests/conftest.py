"""pytest hooks for the client's tests: each test item keeps its reports (item.rep_setup,
item.rep_call, item.rep_teardown), so that a fixture's teardown can tell whether the test
failed (test_integration.py prints the flurryd logs then)."""

import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, "rep_" + report.when, report)
