# Shipped data, examples and the demo.
include share/examples/showcase/local.mk
include share/examples/digits/local.mk

# What the man pages point to, installed under $(pkgdatadir)
# (/usr/local/share/tensorkit by default): the exporter tcompile's users run,
# tgen's schemas, the graph schema, the examples and the digits data.
tntoolsdir = $(pkgdatadir)/tools
dist_tntools_DATA = share/tools/torch2graph.py
tnschemasdir = $(pkgdatadir)/schemas
dist_tnschemas_DATA = schemas/native_functions.yaml schemas/derivatives.yaml \
	schemas/graph.schema.json
tndigitsdir = $(pkgdatadir)/examples/digits
dist_tndigits_DATA = share/examples/digits/train.c share/examples/digits/train_torch.py
tntraindir = $(pkgdatadir)/examples/train
dist_tntrain_DATA = share/examples/train/job.mk share/examples/train/model.py
tnshowcasedir = $(pkgdatadir)/examples/showcase
dist_tnshowcase_DATA = share/examples/showcase/showcase.c
tndatasetsdir = $(pkgdatadir)/datasets
dist_tndatasets_DATA = share/datasets/digits.csv.gz share/datasets/README.md

# Bash completion for every tool: one script, linked under each tool's name
# as bash-completion's loader looks them up.
bashcompletiondir = $(datadir)/bash-completion/completions
dist_bashcompletion_DATA = share/completion/tensorkit.bash
tn_completed_tools = tckpt tcompile tgen trun ttest
install-data-hook:
	cd $(DESTDIR)$(bashcompletiondir) && for t in $(tn_completed_tools); do \
	  rm -f $$t && $(LN_S) tensorkit.bash $$t; done

# The folders that are the package's own go with it (Automake removes files).
uninstall-hook:
	for t in $(tn_completed_tools); do rm -f $(DESTDIR)$(bashcompletiondir)/$$t; done
	-for d in $(tntoolsdir) $(tnschemasdir) $(tndigitsdir) $(tnshowcasedir) $(tntraindir) \
	  $(pkgdatadir)/examples $(tndatasetsdir) $(pkgdatadir) $(tensorincludedir) $(pkglibdir); do \
	  test ! -d $(DESTDIR)$$d || rmdir $(DESTDIR)$$d; done
