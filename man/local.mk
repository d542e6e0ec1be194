# Manual pages: man1 tools, man3 the C API, man5 file formats.
dist_man_MANS += man/man3/libtensor.3
dist_man_MANS += man/man3/tn_autograd.3
dist_man_MANS += man/man3/tn_ops.3
dist_man_MANS += man/man3/tn_nn.3 man/man3/tn_optim.3
dist_man_MANS += man/man3/tn_dist.3
dist_man_MANS += man/man3/tn_io.3
dist_man_MANS += man/man3/tn_compile.3
dist_man_MANS += man/man3/tn_graph_run.3
dist_man_MANS += man/man3/tn_compile_cache.3
dist_man_MANS += man/man3/tn_package.3
dist_man_MANS += man/man3/tn_dcp.3
