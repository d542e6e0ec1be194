# Unit tests of random numbers (lib/core/random.c).
