# The tools: one folder each, main.c plus the tool's own parts.
include bin/ttest/local.mk
include bin/tckpt/local.mk
include bin/trun/local.mk
include bin/tgen/local.mk
include bin/tcompile/local.mk
