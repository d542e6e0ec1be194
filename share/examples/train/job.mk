# share/examples/train/job.mk (a Makefile; Makefile itself is the build's):
# a training job without Python in the loop (tcompile(1) train): PyTorch
# exports the model and its loss once, tcompile trains it from the shell,
# tckpt converts the result to safetensors and PyTorch checks its accuracy.
#
#   make -f share/examples/train/job.mk [TOOLS=bin] [OUT=digits-train]
#
# TOOLS is where tcompile and tckpt are (empty: on PATH); PYTHON needs
# PyTorch 2.x (torch.export) and safetensors.
HERE := $(dir $(lastword $(MAKEFILE_LIST)))
TOP := $(HERE)../../..
PYTHON ?= python3
TOOLS ?=
OUT ?= digits-train
TCOMPILE = $(if $(TOOLS),$(TOOLS)/tcompile/tcompile,tcompile)
TCKPT = $(if $(TOOLS),$(TOOLS)/tckpt/tckpt,tckpt)
MIN_ACCURACY ?= 0.9

all: $(OUT)/checked

$(OUT)/train.npz: $(TOP)/share/datasets/digits.csv.gz $(HERE)model.py
	mkdir -p $(OUT)
	$(PYTHON) $(HERE)model.py prepare $< $(OUT)

$(OUT)/net.json: $(HERE)model.py
	mkdir -p $(OUT)
	$(PYTHON) $(TOP)/share/tools/torch2graph.py $(HERE)model.py:factory -o $(OUT)/net

$(OUT)/ckpt.pt: $(OUT)/net.json $(OUT)/train.npz
	$(TCOMPILE) train $(OUT)/net.json -w $(OUT)/net.pt --data $(OUT)/train.npz \
		--optimizer adamw --lr 0.01 --epochs 10 --save $@ --save-every 100

$(OUT)/model.safetensors: $(OUT)/ckpt.pt
	$(TCKPT) convert --to safetensors --keys 'model.*' $< $@

$(OUT)/checked: $(OUT)/model.safetensors
	$(PYTHON) $(HERE)model.py check $< $(OUT)/test.npz $(MIN_ACCURACY)
	touch $@

clean:
	rm -rf $(OUT)

.PHONY: all clean
