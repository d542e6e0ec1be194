# The tools: one folder each, main.c plus the tool's own parts.
include bin/ttest/local.mk
include bin/tckpt/local.mk
include bin/trun/local.mk
include bin/tgen/local.mk
include bin/tcompile/local.mk

# The usage-error helper every tool shares (bin/cli.h); tgen's own
# messages are left to its restructuring.
bin_ttest_ttest_SOURCES += bin/cli.c bin/cli.h
bin_tckpt_tckpt_SOURCES += bin/cli.c bin/cli.h
bin_trun_trun_SOURCES += bin/cli.c bin/cli.h
bin_tcompile_tcompile_SOURCES += bin/cli.c bin/cli.h
