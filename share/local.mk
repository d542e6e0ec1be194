# Shipped data, examples and the demo.
include share/examples/showcase/local.mk
