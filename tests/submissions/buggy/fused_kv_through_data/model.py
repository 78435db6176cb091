"""
minGPT char-level GPT with RoPE, GQA and sliding-window attention.

Style of this submission: one fused projection `qkv_proj` per attention module (output
stacks [Q; K; V], so n_embd + 2 * n_kv_head * head_dim wide), einops.repeat for the K/V heads,
torch.baddbmm-free plain matmul attention, and RoPE tables kept in float64 and cast to the
input's dtype on every call (so they are rebuilt only for a longer T or another device).
"""

import math
import os
import time

import torch
import torch.nn as nn
from torch.nn import functional as F
from einops import rearrange, repeat

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
    """RoPE with float64 tables cast per call; positions 1..T, theta_i = base^(-2(i-1)/d)."""

    def __init__(self, d: int, base: int = 10_000):
        super().__init__()
        self.d = d
        self.base = base
        self.cos64 = None
        self.sin64 = None

    def _build_cache(self, x: torch.Tensor):
        T = x.shape[-2]
        inv = torch.tensor(float(self.base), dtype=torch.float64) ** (
            -torch.arange(0, self.d, 2, dtype=torch.float64) / self.d)
        C = torch.einsum('m,i->mi', torch.arange(1, T + 1, dtype=torch.float64), inv)
        C = torch.cat([C, C], dim=1).to(x.device)
        self.cos64, self.sin64 = C.cos(), C.sin()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[-2]
        if self.cos64 is None or self.cos64.shape[0] < T or self.cos64.device != x.device:
            self._build_cache(x)
        cos = self.cos64[:T].to(x.dtype)
        sin = self.sin64[:T].to(x.dtype)
        y1, y2 = x.split(self.d // 2, dim=-1)
        return x * cos + torch.cat((-y2, y1), dim=-1) * sin


def sliding_window_mask(T, window, device=None):
    """Boolean (T, T): causal and at most window//2 tokens back."""
    ones = torch.ones(T, T, dtype=torch.bool, device=device)
    return ones.tril().logical_and(ones.triu(-(window // 2)))


def banded_attention(q, k, v, window, dropout):
    """Band-only attention: K/V windows from unfold, scores of shape (B, nh, T, w')."""
    B, nh, T, hs = q.shape
    w = window // 2 + 1
    k_win = rearrange(F.pad(k, (0, 0, w - 1, 0)).unfold(2, w, 1), 'b h t d w -> b h t w d')
    v_win = rearrange(F.pad(v, (0, 0, w - 1, 0)).unfold(2, w, 1), 'b h t d w -> b h t w d')
    s = torch.einsum('bhtd,bhtwd->bhtw', q, k_win) / math.sqrt(hs)
    key_pos = torch.arange(T, device=q.device)[:, None] + torch.arange(w, device=q.device) - (w - 1)
    s = s.masked_fill(key_pos < 0, float('-inf'))
    a = dropout(s.softmax(-1))
    return torch.einsum('bhtw,bhtwd->bhtd', a, v_win)


class GroupedQueryAttention(nn.Module):
    """GQA with one fused [Q; K; V] projection."""

    def __init__(self, config, n_kv_head=None):
        super().__init__()
        self.n_head = config.n_query_head
        self.n_kv_head = n_kv_head or config.n_kv_head
        assert config.n_embd % self.n_head == 0, "n_embd must be divisible by n_query_head"
        assert self.n_head % self.n_kv_head == 0, "n_query_head must be divisible by n_kv_head"
        self.head_dim = config.n_embd // self.n_head
        self.n_embd = config.n_embd
        self.qkv_proj = nn.Linear(config.n_embd, config.n_embd + 2 * self.n_kv_head * self.head_dim)
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        self.block_size = config.block_size
        self.sliding_window = getattr(config, 'sliding_window', None)
        self.sliding_window_impl = getattr(config, 'sliding_window_impl', 'banded')
        self.rope = config.rope
        if self.rope:
            self.query_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)
            self.key_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)

    def forward(self, x):
        B, T, C = x.shape
        kv = self.n_kv_head * self.head_dim
        g = self.n_head // self.n_kv_head
        with AttentionMemory(x.device) as mem:
            W, b = self.qkv_proj.weight, self.qkv_proj.bias
            q = F.linear(x, W[:C], b[:C])
            k, v = F.linear(x, W.data[C:], b.data[C:]).split([kv, kv], dim=-1)  # BUG: .data, K/V rows never learn
            q = rearrange(q, 'b t (h d) -> b h t d', h=self.n_head)
            k = rearrange(k, 'b t (h d) -> b h t d', h=self.n_kv_head)
            v = rearrange(v, 'b t (h d) -> b h t d', h=self.n_kv_head)
            if self.rope:
                q = self.query_rotary_pe(q)
                k = self.key_rotary_pe(k)
            k = repeat(k, 'b h t d -> b (h g) t d', g=g)
            v = repeat(v, 'b h t d -> b (h g) t d', g=g)
            if self.sliding_window is not None and self.sliding_window_impl == 'banded':
                y = banded_attention(q, k, v, self.sliding_window, self.attn_dropout)
            else:
                if self.sliding_window is not None:
                    keep = sliding_window_mask(T, self.sliding_window, x.device)
                else:
                    keep = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
                att = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
                att = torch.where(keep, att, torch.full_like(att, float('-inf')))
                att = self.attn_dropout(torch.softmax(att, dim=-1))
                y = torch.matmul(att, v)
            y = rearrange(y, 'b h t d -> b t (h d)')
            y = self.resid_dropout(self.out_proj(y))
        return y, mem.net_bytes


class CausalSelfAttention(GroupedQueryAttention):
    """Multi-head attention: fused [Q; K; V] projection of width 3 * n_embd."""

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
