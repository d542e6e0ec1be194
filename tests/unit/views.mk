# Unit tests of views, constructors and copies (lib/core/view.c, factory.c, copy.c).
