"""
Full definition of a character-level GPT language model (after Karpathy's minGPT),
upgraded with rotary position embeddings (RoPE), grouped-query attention (GQA) and an
optional sliding-window attention.

References:
1) minGPT: https://github.com/karpathy/minGPT
2) RoFormer (RoPE): Su et al., 2021
3) GQA: Ainslie et al., 2023
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
    """
    Rotary position embeddings (handout section "RoPE"), in the rotate-half layout:

        g(Y) = [Y1 | Y2] * cos(C) + [-Y2 | Y1] * sin(C),   C[m, i] = m * theta_i,

    with positions m = 1..T and theta_i = base^(-2(i-1)/d) for i = 1..d/2, where Y1 and Y2
    are the first and second halves of the last dimension. Input and output: (B, nh, T, d).
    The cos/sin cache is built on the first forward and rebuilt for a longer T, another
    device or another dtype.
    """

    def __init__(self, d: int, base: int = 10_000):
        super().__init__()
        assert d % 2 == 0, "RoPE rotates pairs of features, so d=%d must be even" % d
        self.d = d
        self.base = base
        # non-persistent: the cache follows .to() but stays out of state_dict
        self.register_buffer('cos_cached', None, persistent=False)
        self.register_buffer('sin_cached', None, persistent=False)

    def _build_cache(self, x: torch.Tensor):
        T = x.shape[-2]
        # angles in float64 so that long caches lose no precision before the cast
        i = torch.arange(0, self.d, 2, dtype=torch.float64, device=x.device)  # 2(i-1) for i = 1..d/2
        theta = self.base ** (-i / self.d)                                      # (d/2,)
        m = torch.arange(1, T + 1, dtype=torch.float64, device=x.device)       # positions 1..T
        C = torch.outer(m, theta)                                               # (T, d/2)
        C = torch.cat([C, C], dim=-1)                                           # (T, d)
        self.cos_cached = C.cos().to(x.dtype)
        self.sin_cached = C.sin().to(x.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T = x.shape[-2]
        c = self.cos_cached
        if c is None or c.shape[0] < T or c.device != x.device or c.dtype != x.dtype:
            self._build_cache(x)
        cos = self.cos_cached[:T]                       # (T, d)
        sin = self.sin_cached[:T]                       # (T, d)
        x1, x2 = x.chunk(2, dim=-1)                     # (B, nh, T, d/2) each
        rotated = torch.cat([-x2, x1], dim=-1)          # (B, nh, T, d)
        return x * cos + rotated * sin

# -----------------------------------------------------------------------------
# attention cores shared by both attention modules


def causal_attention(q, k, v, mask, dropout):
    """
    Masked scaled dot-product attention softmax(QK^T/sqrt(d) + M) V.
    q, k, v: (B, nh, T, hs); mask: (T, T) booleans, True where attending is allowed.
    """
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, nh, T, T)
    att = att.masked_fill(~mask, float('-inf'))
    att = F.softmax(att, dim=-1)
    att = dropout(att)
    return att @ v  # (B, nh, T, hs)


def sliding_window_mask(T, window, device=None):
    """
    (T, T) boolean mask of causal sliding-window attention (handout 4.1): query t attends to
    the w' = window//2 + 1 tokens ending at itself, i.e. keys t-w'+1 .. t.
    """
    w = window // 2 + 1
    t = torch.arange(T, device=device)
    offset = t[:, None] - t[None, :]  # (T, T): query index minus key index
    return (offset >= 0) & (offset < w)


def banded_attention(q, k, v, window, dropout):
    """
    Causal sliding-window attention computed only on the band: the same result as
    causal_attention(q, k, v, sliding_window_mask(T, window), dropout), but the scores are
    (B, nh, T, w') instead of (B, nh, T, T), so time and memory are O(T * w).
    """
    B, nh, T, hs = q.shape
    w = window // 2 + 1
    # key/value windows: window j covers tokens j-w+1 .. j; the padding marks positions < 0
    k_pad = F.pad(k, (0, 0, w - 1, 0))               # (B, nh, T+w-1, hs)
    v_pad = F.pad(v, (0, 0, w - 1, 0))               # (B, nh, T+w-1, hs)
    k_win = k_pad.unfold(2, w, 1)                    # (B, nh, T, hs, w) view, no copy
    v_win = v_pad.unfold(2, w, 1)                    # (B, nh, T, hs, w) view, no copy
    att = torch.einsum('bhtd,bhtdw->bhtw', q, k_win) * (1.0 / math.sqrt(hs))  # (B, nh, T, w)
    valid = torch.arange(T, device=q.device)[:, None] - (w - 1) + torch.arange(w, device=q.device) >= 0  # (T, w)
    att = att.masked_fill(~valid, float('-inf'))
    att = F.softmax(att, dim=-1)
    att = dropout(att)
    return torch.einsum('bhtw,bhtdw->bhtd', att, v_win)  # (B, nh, T, hs)


class _AttentionBase(nn.Module):
    """Pieces both attention modules share: the causal mask buffer and the attention core."""

    def _init_mask(self, config):
        # causal mask, True where a query may attend; non-persistent so that a checkpoint
        # trained at one block_size loads into a model with another
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size, dtype=torch.bool))
                                     .view(1, 1, config.block_size, config.block_size), persistent=False)
        self.sliding_window = getattr(config, 'sliding_window', None)
        self.sliding_window_impl = getattr(config, 'sliding_window_impl', 'banded')

    def _attend(self, q, k, v):
        """q, k, v: (B, nh, T, hs) -> (B, nh, T, hs)"""
        T = q.size(-2)
        if self.sliding_window is not None:
            if self.sliding_window_impl == 'banded':
                return banded_attention(q, k, v, self.sliding_window, self.attn_dropout)
            mask = sliding_window_mask(T, self.sliding_window, q.device)  # (T, T)
            return causal_attention(q, k, v, mask, self.attn_dropout)
        mask = self.bias[0, 0, :T, :T]  # (T, T)
        return causal_attention(q, k, v, mask, self.attn_dropout)


class CausalSelfAttention(_AttentionBase):
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    It is possible to use torch.nn.MultiheadAttention here but I am including an
    explicit implementation here to show that there is nothing too scary here.
    """

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_query_head == 0
        # query, key, value projections for all heads
        self.q_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename
        self.k_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename
        self.v_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename
        # output projection
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)  # Do NOT rename
        # regularization
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        self._init_mask(config)
        self.n_head = config.n_query_head
        self.n_embd = config.n_embd
        self.rope = config.rope
        if self.rope:
            head_dim = config.n_embd // config.n_query_head
            self.query_rotary_pe = RotaryPositionalEmbeddings(head_dim)  # Do NOT rename
            self.key_rotary_pe = RotaryPositionalEmbeddings(head_dim)    # Do NOT rename

    def forward(self, x):
        B, T, C = x.size()  # batch size, sequence length, embedding dimensionality (n_embd)
        hs = C // self.n_head
        with AttentionMemory(x.device) as mem:
            # calculate query, key, values for all heads in batch and move head forward to be the batch dim
            q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
            k = self.k_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
            v = self.v_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)  # (B, nh, T, hs)
            if self.rope:
                q = self.query_rotary_pe(q)
                k = self.key_rotary_pe(k)
            # causal self-attention; Self-attend: (B, nh, T, hs) x (B, nh, hs, T) -> (B, nh, T, T)
            y = self._attend(q, k, v)  # (B, nh, T, hs)
            y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble all head outputs side by side
            # output projection
            y = self.resid_dropout(self.out_proj(y))
        return y, mem.net_bytes


class GroupedQueryAttention(_AttentionBase):
    """
    Grouped-query attention (handout section 5, "GQA"): n_query_head query heads share
    n_kv_head key/value heads in groups of g = n_query_head // n_kv_head. Query head (i, j)
    attends with key/value head i, i.e. query heads i*g .. i*g+g-1 share KV head i.
    """

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_query_head == 0, "n_embd must be divisible by n_query_head"
        assert config.n_query_head % config.n_kv_head == 0, "n_query_head must be divisible by n_kv_head"
        self.n_head = config.n_query_head
        self.n_kv_head = config.n_kv_head
        self.n_embd = config.n_embd
        self.head_dim = config.n_embd // config.n_query_head
        self.q_proj = nn.Linear(config.n_embd, config.n_embd)                       # Do NOT rename
        self.k_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)      # Do NOT rename
        self.v_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)      # Do NOT rename
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)                     # Do NOT rename
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        self._init_mask(config)
        self.rope = config.rope
        if self.rope:
            self.query_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)  # Do NOT rename
            self.key_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)    # Do NOT rename

    def forward(self, x):
        B, T, C = x.size()
        hs, g = self.head_dim, self.n_head // self.n_kv_head
        with AttentionMemory(x.device) as mem:
            q = self.q_proj(x).view(B, T, self.n_head, hs).transpose(1, 2)     # (B, nh, T, hs)
            k = self.k_proj(x).view(B, T, self.n_kv_head, hs).transpose(1, 2)  # (B, nkv, T, hs)
            v = self.v_proj(x).view(B, T, self.n_kv_head, hs).transpose(1, 2)  # (B, nkv, T, hs)
            if self.rope:
                q = self.query_rotary_pe(q)
                k = self.key_rotary_pe(k)
            # query heads i*g .. i*g+g-1 use KV head i
            k = k.repeat_interleave(g, dim=1)  # (B, nh, T, hs)
            v = v.repeat_interleave(g, dim=1)  # (B, nh, T, hs)
            if self.sliding_window is not None:
                y = self._attend(q, k, v)  # (B, nh, T, hs)
            else:
                q = q * (1.0 / math.sqrt(hs))  # BUG: SDPA below divides by sqrt(hs) again (its default scale)
                p = self.attn_dropout.p if self.training else 0.0
                y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias[0, 0, :T, :T], dropout_p=p)
            y = y.transpose(1, 2).contiguous().view(B, T, C)
            y = self.resid_dropout(self.out_proj(y))
        return y, mem.net_bytes


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
