"""Runs one of the client's pytest files for meson (tests/native/python/meson.build):
    /usr/bin/python3 client/python/tests/run.py test_vectors.py [pytest args...]
A missing pytest FAILS with the Debian package to install (it never skips), and so does a
run in which pytest collected nothing or skipped a test: meson counts this test by exit code."""

import os
import sys

if sys.version_info < (3, 11):
    sys.exit(f"run.py: Python {sys.version.split()[0]} is too old; the client needs 3.11 "
             "(Debian 12: apt-get install python3)")
try:
    import pytest
except ImportError:
    sys.exit("run.py: pytest is not installed for /usr/bin/python3: apt-get install python3-pytest "
             "(scripts/setup installs it)")


class NoSkips:
    skipped = 0

    def pytest_runtest_logreport(self, report):
        if report.skipped:
            NoSkips.skipped += 1


here = os.path.dirname(os.path.abspath(__file__))
arguments = [os.path.join(here, sys.argv[1]), "-p", "no:cacheprovider", "-v", "-rA",
             "--rootdir", os.path.dirname(here), *sys.argv[2:]]
code = pytest.main(arguments, plugins=[NoSkips()])
if code == pytest.ExitCode.NO_TESTS_COLLECTED:
    sys.exit("run.py: no test ran")
if code == 0 and NoSkips.skipped:
    sys.exit(f"run.py: {NoSkips.skipped} tests skipped; every test of this file must run")
sys.exit(int(code))
