# The model zoo against PyTorch 2.x (issue 23): models exported at test
# time by tests/models/zoo.py, skipped without PyTorch 2.x.
CLI_TESTS += tests/models/zoo.bats tests/models/fixtures.bats
EXTRA_DIST += tests/models/zoo.py tests/models/fixtures.py
