"""
minGPT char-level GPT with RoPE, GQA and sliding-window attention.

Style of this submission: K/V are never repeated. Queries are viewed as
(B, n_kv_head, g, T, hs) and a 5-D torch.einsum scores each group against its single K/V
head. RoPE uses torch.view_as_complex on (Y1, Y2) pairs (feature i with feature i + d/2).
MHA is the same module with g = 1.
"""

import math
import os
import time

import torch
import torch.nn as nn
from torch.nn import functional as F

from mingpt.utils import CfgNode as CN, AttentionMemory

# -----------------------------------------------------------------------------


class NewGELU(nn.Module):
    """
    Implementation of the GELU activation function currently in Google BERT repo (identical to OpenAI GPT).
    Reference: Gaussian Error Linear Units (GELU) paper: https://arxiv.org/abs/1606.08415
    """
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class RotaryPositionalEmbeddings(nn.Module):
    """RoPE via view_as_complex: pair (Y1[i], Y2[i]) is the complex number Y1[i] + i*Y2[i]."""

    def __init__(self, d: int, base: int = 10_000):
        super().__init__()
        self.d = d
        self.base = base
        self._cache = None   # complex (T, d/2), dtype matched to the input

    def _build_cache(self, x: torch.Tensor):
        T = x.shape[-2]
        exponent = torch.arange(0, self.d // 2, device=x.device, dtype=torch.float64) * (2.0 / self.d)
        theta = 1.0 / (self.base ** exponent)
        angle = torch.arange(1, T + 1, device=x.device, dtype=torch.float64)[:, None] * theta
        pairs = torch.stack([angle.cos(), angle.sin()], dim=-1)             # (T, d/2, 2)
        real = torch.float64 if x.dtype == torch.float64 else torch.float32
        self._cache = torch.view_as_complex(pairs.to(real).contiguous())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[-2]
        real = torch.float64 if x.dtype == torch.float64 else torch.float32
        c = self._cache
        if c is None or c.shape[0] < T or c.device != x.device or c.real.dtype != real:
            self._build_cache(x)
        shape = x.shape
        pairs = x.to(real).reshape(*shape[:-1], 2, self.d // 2).transpose(-1, -2).contiguous()  # (..., d/2, 2)
        z = torch.view_as_complex(pairs) * self._cache[:T]
        out = torch.view_as_real(z).transpose(-1, -2).reshape(shape)     # back to [Y1 | Y2]
        return out.to(x.dtype)


def sliding_window_mask(T, window, device=None):
    """True where key s is among the window//2 + 1 most recent tokens up to query t."""
    w = window // 2 + 1
    t = torch.arange(T, device=device)
    return (t[None, :] <= t[:, None]) & (t[:, None] - t[None, :] < w)


def banded_attention(q, k, v, window, dropout):
    """
    Band-only attention. q: (B, nh, T, hs); k, v: (B, nkv, T, hs) with nkv dividing nh (the
    query heads of a group share one K/V head, no repeat). Scores are (B, nkv, g, T, w').
    """
    B, nh, T, hs = q.shape
    nkv = k.shape[1]
    w = window // 2 + 1
    qg = q.view(B, nkv, nh // nkv, T, hs)
    k_win = F.pad(k, (0, 0, w - 1, 0)).unfold(2, w, 1)      # (B, nkv, T, hs, w)
    v_win = F.pad(v, (0, 0, w - 1, 0)).unfold(2, w, 1)
    att = torch.einsum('bkgtd,bktdw->bkgtw', qg, k_win) / math.sqrt(hs)
    first_key = torch.arange(T, device=q.device)[:, None] - (w - 1) + torch.arange(w, device=q.device)
    att = att.masked_fill(first_key < 0, float('-inf'))
    att = dropout(F.softmax(att, dim=-1))
    y = torch.einsum('bkgtw,bktdw->bkgtd', att, v_win)
    return y.reshape(B, nh, T, hs)


class GroupedQueryAttention(nn.Module):
    """Grouped-query attention without materialising repeated keys/values."""

    def __init__(self, config, n_kv_head=None):
        super().__init__()
        self.n_head = config.n_query_head
        self.n_kv_head = config.n_kv_head if n_kv_head is None else n_kv_head
        assert config.n_embd % self.n_head == 0 and self.n_head % self.n_kv_head == 0
        self.head_dim = config.n_embd // self.n_head
        self.q_proj = nn.Linear(config.n_embd, config.n_embd)
        self.k_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)
        self.v_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        bs = config.block_size
        self.register_buffer('mask', torch.tril(torch.ones(bs, bs, dtype=torch.bool)), persistent=False)
        self.sliding_window = getattr(config, 'sliding_window', None)
        self.sliding_window_impl = getattr(config, 'sliding_window_impl', 'banded')
        self.rope = config.rope
        if self.rope:
            self.query_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)
            self.key_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)

    def forward(self, x):
        B, T, C = x.shape
        nh, nkv, hs = self.n_head, self.n_kv_head, self.head_dim
        g = nh // nkv
        with AttentionMemory(x.device) as mem:
            q = self.q_proj(x).view(B, T, nh, hs).permute(0, 2, 1, 3)
            k = self.k_proj(x).view(B, T, nkv, hs).permute(0, 2, 1, 3)
            v = self.v_proj(x).view(B, T, nkv, hs).permute(0, 2, 1, 3)
            if self.rope:
                q = self.query_rotary_pe(q)
                k = self.key_rotary_pe(k)
            if self.sliding_window is not None and self.sliding_window_impl == 'banded':
                y = banded_attention(q, k, v, self.sliding_window, self.attn_dropout)
            else:
                qg = q.reshape(B, nkv, g, T, hs)                  # query head i*g + j -> (i, j)
                scores = torch.einsum('bkgtd,bksd->bkgts', qg, k) * hs ** -0.5
                if self.sliding_window is not None:
                    allowed = sliding_window_mask(T, self.sliding_window, x.device)
                else:
                    allowed = self.mask[:T, :T]
                scores = scores.masked_fill(~allowed, float('-inf'))
                att = self.attn_dropout(torch.softmax(scores, dim=-1))
                y = torch.einsum('bkgts,bksd->bkgtd', att, v).reshape(B, nh, T, hs)
            y = y.permute(0, 2, 1, 3).reshape(B, T, C)
            y = self.resid_dropout(self.out_proj(y))
        return y, mem.net_bytes


class CausalSelfAttention(GroupedQueryAttention):
    """Multi-head attention = GQA with one query head per K/V head."""

    def __init__(self, config):
        super().__init__(config, n_kv_head=config.n_query_head)



# -----------------------------------------------------------------------------


class Block(nn.Module):
    """ an unassuming Transformer block """

    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd)
        if config.n_query_head != config.n_kv_head:
            self.attn = GroupedQueryAttention(config)
        else:
            self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.ModuleDict(dict(
            c_fc    = nn.Linear(config.n_embd, 4 * config.n_embd),
            c_proj  = nn.Linear(4 * config.n_embd, config.n_embd),
            act     = NewGELU(),
            dropout = nn.Dropout(config.resid_pdrop),
        ))
        m = self.mlp
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x))))  # MLP forward

    def forward(self, x):
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
        start = time.perf_counter()
        attn_out, mem = self.attn(self.ln_1(x))
        if x.is_cuda:
            torch.cuda.synchronize(x.device)
        seconds = time.perf_counter() - start
        x = x + attn_out
        x = x + self.mlpf(self.ln_2(x))
        return x, seconds, mem


class GPT(nn.Module):
    """ GPT Language Model """

    @staticmethod
    def get_default_config():
        C = CN()
        # either model_type or (n_layer, n_query_head, n_embd) must be given in the config
        C.model_type = 'gpt'
        C.declare('n_layer', None, int)
        C.declare('n_query_head', None, int)
        C.declare('n_kv_head', None, int)     # None means n_query_head (multi-head attention)
        C.declare('n_embd', None, int)
        # these options must be filled in externally
        C.declare('vocab_size', None, int)
        C.declare('block_size', None, int)
        # dropout hyperparameters
        C.embd_pdrop = 0.1
        C.resid_pdrop = 0.1
        C.attn_pdrop = 0.1
        # position information: rotary embeddings in every attention layer instead of wpe
        C.rope = False
        # continue training from the model.pt saved in this folder
        C.declare('pretrained_folder', None, str)
        # causal sliding window w (each query sees the w//2 + 1 tokens ending at itself); None = full causal
        C.declare('sliding_window', None, int)
        C.sliding_window_impl = 'banded'  # 'banded' (O(T*w)) or 'dense' (masked T x T)
        return C

    def __init__(self, config):
        super().__init__()
        assert config.vocab_size is not None
        assert config.block_size is not None
        self.block_size = config.block_size
        self.rope = config.rope

        # model_type fills in whichever of n_layer, n_query_head, n_embd were not given,
        # so the handout's --model.n_query_head=6 works on top of the default 'gpt-mini'
        if config.model_type is not None:
            preset = {
                # names follow the huggingface naming conventions
                # GPT-1
                'openai-gpt':   dict(n_layer=12, n_query_head=12, n_embd=768),  # 117M params
                # GPT-2 configs
                'gpt2':         dict(n_layer=12, n_query_head=12, n_embd=768),  # 124M params
                'gpt2-medium':  dict(n_layer=24, n_query_head=16, n_embd=1024), # 350M params
                'gpt2-large':   dict(n_layer=36, n_query_head=20, n_embd=1280), # 774M params
                'gpt2-xl':      dict(n_layer=48, n_query_head=25, n_embd=1600), # 1558M params
                # Gophers
                'gopher-44m':   dict(n_layer=8, n_query_head=16, n_embd=512),
                # (there are a number more...)
                # I made these tiny models up
                'gpt-mini':     dict(n_layer=6, n_query_head=6, n_embd=192),
                'gpt-micro':    dict(n_layer=4, n_query_head=4, n_embd=128),
                'gpt-nano':     dict(n_layer=3, n_query_head=3, n_embd=48),
            }.get(config.model_type)
            assert preset is not None, "unknown model_type %r" % config.model_type
            config.merge_from_dict({k: v for k, v in preset.items() if getattr(config, k) is None})
        assert None not in (config.n_layer, config.n_query_head, config.n_embd), \
            "give a model_type or all of n_layer, n_query_head, n_embd"
        if config.n_kv_head is None:
            config.n_kv_head = config.n_query_head
        assert config.n_query_head % config.n_kv_head == 0, \
            "n_query_head=%d must be divisible by n_kv_head=%d" % (config.n_query_head, config.n_kv_head)
        assert config.n_embd % config.n_query_head == 0, \
            "n_embd=%d must be divisible by n_query_head=%d" % (config.n_embd, config.n_query_head)

        modules = dict(
            wte = nn.Embedding(config.vocab_size, config.n_embd),
            drop = nn.Dropout(config.embd_pdrop),
            h = nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f = nn.LayerNorm(config.n_embd),
        )
        if not config.rope:
            # absolute positions only without RoPE; RoPE carries position inside attention
            modules['wpe'] = nn.Embedding(config.block_size, config.n_embd)
        self.transformer = nn.ModuleDict(modules)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)

        # init all weights, and apply a special scaled init to the residual projections, per GPT-2 paper
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith('out_proj.weight') or pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02/math.sqrt(2 * config.n_layer))

        n_params = sum(p.numel() for p in self.transformer.parameters())
        print("number of parameters: %.2fM" % (n_params/1e6,))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        elif isinstance(module, nn.LayerNorm):
            torch.nn.init.zeros_(module.bias)
            torch.nn.init.ones_(module.weight)

    def load_pretrained(self, folder):
        """
        Continue from the model.pt a previous run saved in `folder`, possibly trained at a
        shorter block_size: every tensor is copied, and a position table (wpe) that grew
        keeps its trained rows and its fresh initialisation for the new positions.
        """
        path = os.path.join(folder, 'model.pt')
        if not os.path.isfile(path):
            raise FileNotFoundError("no model.pt in pretrained_folder %r: train a model there first" % folder)
        saved = torch.load(path, map_location='cpu', weights_only=True)
        own = self.state_dict()
        unknown = sorted(set(saved) - set(own))
        missing = sorted(set(own) - set(saved))
        if unknown or missing:
            raise ValueError("checkpoint %s does not fit this model (rope/n_kv_head/n_layer differ?): "
                             "unexpected %s, missing %s" % (path, unknown[:5], missing[:5]))
        with torch.no_grad():
            for name, tensor in saved.items():
                target = own[name]
                if name == 'transformer.wpe.weight' and tensor.shape[0] != target.shape[0]:
                    n = min(tensor.shape[0], target.shape[0])
                    target[:n].copy_(tensor[:n])
                elif tensor.shape != target.shape:
                    raise ValueError("checkpoint tensor %s has shape %s, model expects %s"
                                     % (name, tuple(tensor.shape), tuple(target.shape)))
                else:
                    target.copy_(tensor)

    def configure_optimizers(self, train_config):
        """
        This long function is unfortunately doing something very simple and is being very defensive:
        We are separating out all parameters of the model into two buckets: those that will experience
        weight decay for regularization and those that won't (biases, and layernorm/embedding weights).
        We are then returning the PyTorch optimizer object.
        """
        decay, no_decay = set(), set()
        whitelist_weight_modules = (torch.nn.Linear, )
        blacklist_weight_modules = (torch.nn.LayerNorm, torch.nn.Embedding)
        for mn, m in self.named_modules():
            for pn, p in m.named_parameters(recurse=False):
                fpn = '%s.%s' % (mn, pn) if mn else pn  # full param name
                if pn.endswith('bias'):
                    no_decay.add(fpn)
                elif pn.endswith('weight') and isinstance(m, whitelist_weight_modules):
                    decay.add(fpn)
                elif pn.endswith('weight') and isinstance(m, blacklist_weight_modules):
                    no_decay.add(fpn)

        param_dict = {pn: p for pn, p in self.named_parameters()}
        inter_params = decay & no_decay
        union_params = decay | no_decay
        assert len(inter_params) == 0, "parameters %s made it into both decay/no_decay sets!" % (str(inter_params), )
        assert len(param_dict.keys() - union_params) == 0, "parameters %s were not separated into either decay/no_decay set!" \
                                                    % (str(param_dict.keys() - union_params), )

        optim_groups = [
            {"params": [param_dict[pn] for pn in sorted(list(decay))], "weight_decay": train_config.weight_decay},
            {"params": [param_dict[pn] for pn in sorted(list(no_decay))], "weight_decay": 0.0},
        ]
        optimizer = torch.optim.AdamW(optim_groups, lr=train_config.learning_rate, betas=train_config.betas)
        return optimizer

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()
        assert t <= self.block_size, f"Cannot forward sequence of length {t}, block size is only {self.block_size}"

        # forward the GPT model itself
        x = self.transformer.wte(idx)  # token embeddings of shape (b, t, n_embd)
        if not self.rope:
            pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0)  # shape (1, t)
            x = x + self.transformer.wpe(pos)  # position embeddings of shape (1, t, n_embd)
        x = self.transformer.drop(x)
        attn_seconds, attn_mem = [], []
        for i, block in enumerate(self.transformer.h):
            x, seconds, mem = block(x)
            attn_seconds.append(seconds)
            attn_mem.append(mem)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)

        # if we are given some desired targets also calculate the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss, sum(attn_seconds) / len(attn_seconds), sum(attn_mem) / len(attn_mem)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        """
        Take a conditioning sequence of indices idx (LongTensor of shape (b,t)) and complete
        the sequence max_new_tokens times, feeding the predictions back into the model each time.
        Most likely you'll want to make sure to be in model.eval() mode of operation for this.
        Returns (idx, mean attention seconds per forward).
        """
        attn_times = []
        for _ in range(max_new_tokens):
            # if the sequence context is growing too long we must crop it at block_size
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            # forward the model to get the logits for the index in the sequence
            logits, _, seconds, _ = self(idx_cond)
            attn_times.append(seconds)
            # pluck the logits at the final step and scale by desired temperature
            logits = logits[:, -1, :] / temperature
            # optionally crop the logits to only the top k options
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float('Inf')
            # apply softmax to convert logits to (normalized) probabilities
            probs = F.softmax(logits, dim=-1)
            # either sample from the distribution or take the most likely element
            if do_sample:
                idx_next = torch.multinomial(probs, num_samples=1)
            else:
                _, idx_next = torch.topk(probs, k=1, dim=-1)
            # append sampled index to the running sequence and continue
            idx = torch.cat((idx, idx_next), dim=1)

        return idx, sum(attn_times) / max(len(attn_times), 1)
