# Unit tests of printing (lib/core/print.c).
