"""A GPT written once against either library: token and position embeddings, pre-norm blocks of causal
self-attention (one projection cut into queries, keys and values) and a 4x GELU MLP, the head tied to the
token embedding, the next-token cross-entropy.  bench/train_step.py times its step in PyTorch and in
namedtensor (named dims and PyTorch code on unnamed tensors); tests/test_compile_models.py trains a small
one compiled against eager.  It imports nothing, so that both can import it.
"""


def gpt_class(nn, F, rearrange=None, *, vocab: int, width: int, heads: int, layers: int, block: int):
    """The GPT's class, written against ``nn`` and ``F`` (PyTorch's or namedtensor's, positional), or
    with named dims when ``rearrange`` (``nt.rearrange``) is given; ``GPT()`` takes ``(idx, targets, pos)``
    and returns the next-token cross-entropy."""
    named = rearrange is not None

    class Attention(nn.Module):
        def __init__(self, c, h):
            super().__init__()
            self.h = h
            self.c_attn = nn.Linear("embed", "qkv", c, 3 * c) if named else nn.Linear(c, 3 * c)
            self.c_proj = nn.Linear("embed", "embed", c, c) if named else nn.Linear(c, c)

        def forward(self, x):
            if named:
                qkv = rearrange(self.c_attn(x), "batch seq qkv=(three head d) -> three batch head seq d",
                                three=3, head=self.h)
                q, k, v = qkv.unbind("three")
                y = F.scaled_dot_product_attention(q, k.rename(seq="key"), v.rename(seq="key"), dim="d",
                                                   key_dim="key", is_causal=True)
                return self.c_proj(rearrange(y, "batch head seq d -> batch seq embed=(head d)"))
            b, t, c = x.size()
            q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in self.c_attn(x).split(c, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class MLP(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.c_fc = nn.Linear("embed", "mlp", c, 4 * c) if named else nn.Linear(c, 4 * c)
            self.c_proj = nn.Linear("mlp", "embed", 4 * c, c) if named else nn.Linear(4 * c, c)

        def forward(self, x):
            return self.c_proj(F.gelu(self.c_fc(x)))

    def layer_norm(c):
        return nn.LayerNorm("embed", c) if named else nn.LayerNorm(c)

    class Block(nn.Module):
        def __init__(self, c, h):
            super().__init__()
            self.ln_1, self.attn, self.ln_2, self.mlp = layer_norm(c), Attention(c, h), layer_norm(c), MLP(c)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.mlp(self.ln_2(x))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            c = width
            if named:
                self.wte = nn.Embedding(vocab, c, "embed")
                self.wpe = nn.Embedding(block, c, "embed", vocab_dim="pos")
                self.lm_head = nn.Linear("embed", "vocab", c, vocab, bias=False)
            else:
                self.wte, self.wpe = nn.Embedding(vocab, c), nn.Embedding(block, c)
                self.lm_head = nn.Linear(c, vocab, bias=False)
            self.h = nn.ModuleList([Block(c, heads) for _ in range(layers)])
            self.ln_f = layer_norm(c)
            self.wte.weight = self.lm_head.weight

        def forward(self, idx, targets, pos):
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            if named:
                return F.cross_entropy(logits, targets, dim="vocab")
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    return GPT
