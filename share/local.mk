# Shipped data, examples and the demo.
include share/examples/showcase/local.mk
include share/examples/digits/local.mk
