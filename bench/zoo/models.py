"""kiln's model zoo: the model families users bring, defined by torchvision 0.14 and PyTorch
(Debian's), with seeded random weights: no downloads.

Each entry: name -> Entry(family, build, inputs), where `build()` returns the nn.Module in eval
mode and `inputs` the example input shapes (float32, or ('i64', shape, high) for token ids).
Small models (fast to export and run) are marked `small`: their correctness check runs in
`make test`; the rest run under the label zoo-large.
"""
import collections
import math

import torch
import torch.nn as nn
import torchvision.models as tvm
import torchvision.models.segmentation as seg

Entry = collections.namedtuple('Entry', 'family build inputs small')


def _classifier(fn, **kw):
    def build():
        return fn(weights=None, **kw)
    return build


class Recurrent(nn.Module):
    """An LSTM or GRU over a sequence, batch first, with a linear head on every step."""

    def __init__(self, cell, inputs, hidden, layers, bidirectional):
        super().__init__()
        rnn = nn.LSTM if cell == 'lstm' else nn.GRU
        self.rnn = rnn(inputs, hidden, num_layers=layers, bidirectional=bidirectional, batch_first=True)
        self.head = nn.Linear(hidden * (2 if bidirectional else 1), 16)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


class CausalDecoder(nn.Module):
    """A small GPT-style decoder: nn.TransformerEncoder layers under a causal mask, token
    embedding and positions in, logits out."""

    def __init__(self, vocab=1000, d=256, heads=4, ff=1024, layers=4, seq=64):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(1, seq, d) * 0.02)
        layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, activation='gelu', batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, vocab)
        self.register_buffer('mask', torch.triu(torch.full((seq, seq), float('-inf')), diagonal=1))

    def forward(self, tokens):
        h = self.embed(tokens) + self.pos[:, :tokens.shape[1]]
        h = self.blocks(h, mask=self.mask[:tokens.shape[1], :tokens.shape[1]])
        return self.out(self.norm(h))


class GPT2Block(nn.Module):
    """A GPT-2 block as Hugging Face writes it, not through nn.Transformer*: fused QKV
    projection, causal mask by where() on a lower-triangular buffer, and gelu_new, the tanh
    GELU spelled with pow(x, 3)."""

    def __init__(self, d, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        self.register_buffer('causal', torch.tril(torch.ones(seq, seq)).view(1, 1, seq, seq))

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        w = q @ k.transpose(-1, -2) / math.sqrt(c // self.heads)
        w = w.masked_fill(self.causal[:, :, :t, :t] == 0, -1e4)
        a = (torch.softmax(w, dim=-1) @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(a)
        h = self.fc(self.ln2(x))
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * torch.pow(h, 3.0))))
        return x + self.out(h)


class GPT2(nn.Module):
    """GPT-2's shape in small: token and position embeddings, GPT2Blocks, final norm, logits."""

    def __init__(self, vocab=1000, d=256, heads=4, layers=4, seq=64):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.Sequential(*[GPT2Block(d, heads, seq) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)

    def forward(self, tokens):
        positions = torch.arange(tokens.shape[1], device=tokens.device).unsqueeze(0)
        return self.head(self.ln(self.blocks(self.wte(tokens) + self.wpe(positions))))


class EncoderDecoder(nn.Module):
    """nn.Transformer (encoder and decoder) with a causal mask on the target."""

    def __init__(self, d=256, heads=4, ff=1024, layers=3, tgt=32):
        super().__init__()
        self.t = nn.Transformer(d, heads, layers, layers, ff, dropout=0.0, batch_first=True)
        self.register_buffer('mask', torch.triu(torch.full((tgt, tgt), float('-inf')), diagonal=1))

    def forward(self, src, tgt):
        return self.t(src, tgt, tgt_mask=self.mask)


class SegmentationOut(nn.Module):
    """torchvision's segmentation models return a dict; export its 'out'."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)['out']


def _segmentation(fn, **kw):
    def build():
        return SegmentationOut(fn(weights=None, weights_backbone=None, **kw))
    return build


def _inception():
    return tvm.inception_v3(weights=None, aux_logits=False, init_weights=False)


def _googlenet():
    return tvm.googlenet(weights=None, aux_logits=False, init_weights=False)


IMG = (3, 224, 224)


def zoo():
    z = collections.OrderedDict()

    def add(name, family, build, inputs, small=False):
        z[name] = Entry(family, build, inputs, small)

    def cls(name, family, fn, big_batch=8, size=224, small=False, **kw):
        add(f'{name}_b1', family, _classifier(fn, **kw), [(1, 3, size, size)], small)
        add(f'{name}_b{big_batch}', family, _classifier(fn, **kw), [(big_batch, 3, size, size)])

    cls('resnet50', 'resnet', tvm.resnet50)
    cls('resnext50', 'resnext', tvm.resnext50_32x4d)
    cls('wide_resnet50', 'wide-resnet', tvm.wide_resnet50_2, big_batch=4)
    cls('densenet121', 'densenet', tvm.densenet121)
    cls('mobilenet_v2', 'mobilenet', tvm.mobilenet_v2, small=True)
    cls('mobilenet_v3_large', 'mobilenet', tvm.mobilenet_v3_large)
    cls('mobilenet_v3_small', 'mobilenet', tvm.mobilenet_v3_small, small=True)
    cls('efficientnet_b0', 'efficientnet', tvm.efficientnet_b0)
    cls('efficientnet_v2_s', 'efficientnet', tvm.efficientnet_v2_s, big_batch=4)
    cls('mnasnet', 'mnasnet', tvm.mnasnet1_0)
    cls('shufflenet_v2', 'shufflenet', tvm.shufflenet_v2_x1_0, small=True)
    cls('squeezenet', 'squeezenet', tvm.squeezenet1_1, small=True)
    cls('regnet_y_400mf', 'regnet', tvm.regnet_y_400mf)
    add('googlenet_b1', 'inception', _googlenet, [(1, 3, 224, 224)])
    add('googlenet_b8', 'inception', _googlenet, [(8, 3, 224, 224)])
    add('inception_v3_b1', 'inception', _inception, [(1, 3, 299, 299)])
    add('inception_v3_b4', 'inception', _inception, [(4, 3, 299, 299)])
    cls('convnext_tiny', 'convnext', tvm.convnext_tiny, big_batch=4)
    cls('vit_b_16', 'vit', tvm.vit_b_16, big_batch=4)
    cls('swin_t', 'swin', tvm.swin_t, big_batch=4)
    cls('maxvit_t', 'maxvit', tvm.maxvit_t, big_batch=4)
    for name, fn in (('fcn_resnet50', seg.fcn_resnet50), ('deeplabv3_mobilenet', seg.deeplabv3_mobilenet_v3_large),
                     ('lraspp_mobilenet', seg.lraspp_mobilenet_v3_large)):
        add(f'{name}_b1', 'segmentation', _segmentation(fn, num_classes=21), [(1, 3, 256, 256)],
            small=name == 'lraspp_mobilenet')
        add(f'{name}_b4', 'segmentation', _segmentation(fn, num_classes=21), [(4, 3, 256, 256)])
    for cell in ('lstm', 'gru'):
        for layers, bidir, seq in ((1, False, 16), (2, False, 32), (2, True, 128)):
            tag = f'{cell}_l{layers}{"_bi" if bidir else ""}_s{seq}'
            for batch in (1, 16):
                add(f'{tag}_b{batch}', cell,
                    (lambda c=cell, l=layers, b=bidir: Recurrent(c, 64, 128, l, b)),
                    [(batch, seq, 64)], small=(seq == 16))
    add('decoder_s64_b1', 'transformer', lambda: CausalDecoder(), [('i64', (1, 64), 1000)], small=True)
    add('decoder_s64_b8', 'transformer', lambda: CausalDecoder(), [('i64', (8, 64), 1000)])
    add('gpt2_s64_b1', 'transformer', lambda: GPT2(), [('i64', (1, 64), 1000)], small=True)
    add('gpt2_s64_b8', 'transformer', lambda: GPT2(), [('i64', (8, 64), 1000)])
    add('encdec_s32_b1', 'transformer', lambda: EncoderDecoder(), [(1, 48, 256), (1, 32, 256)], small=True)
    add('encdec_s32_b8', 'transformer', lambda: EncoderDecoder(), [(8, 48, 256), (8, 32, 256)])
    return z
