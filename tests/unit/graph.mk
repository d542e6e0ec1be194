# Unit tests of lib/graph (the JSON graph, .pt2 archives, the interpreter).
UNIT_TESTS += tests/unit/test_graph
tests_unit_test_graph_SOURCES = tests/unit/test_graph.c
tests_unit_test_graph_CPPFLAGS = $(TN_UNIT_CPP) -DTN_SRCDIR='"$(abs_top_srcdir)"'
tests_unit_test_graph_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_graph_LDFLAGS = $(TN_UNIT_LINK)
# (tests/fixtures is distributed whole by tests/local.mk)
# The libFuzzer target is built by its own script (clang), not by make.
EXTRA_DIST += tests/fuzz/fuzz_graph.c tests/fuzz/graph.sh tests/fuzz/json.dict
UNIT_TESTS += tests/unit/test_graph_json
tests_unit_test_graph_json_SOURCES = tests/unit/test_graph_json.c
tests_unit_test_graph_json_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_graph_json_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_graph_json_LDFLAGS = $(TN_UNIT_LINK)
UNIT_TESTS += tests/unit/test_graph_functionalize
tests_unit_test_graph_functionalize_SOURCES = tests/unit/test_graph_functionalize.c
tests_unit_test_graph_functionalize_CPPFLAGS = $(TN_UNIT_CPP)
tests_unit_test_graph_functionalize_LDADD = $(TN_UNIT_LIBS)
tests_unit_test_graph_functionalize_LDFLAGS = $(TN_UNIT_LINK)
