"""
Full definition of a character-level GPT language model (after Karpathy's minGPT),
upgraded with rotary position embeddings (RoPE) and grouped-query attention (GQA).

References:
1) minGPT: https://github.com/karpathy/minGPT
2) RoFormer (RoPE): Su et al., 2021
3) GQA: Ainslie et al., 2023
"""

import json
import math
import os
import time

import torch
import torch.nn as nn
from torch.nn import functional as F
from einops import rearrange, repeat

from mingpt.utils import CfgNode as CN

# -----------------------------------------------------------------------------


class NewGELU(nn.Module):
    """
    Implementation of the GELU activation function currently in Google BERT repo (identical to OpenAI GPT).
    Reference: Gaussian Error Linear Units (GELU) paper: https://arxiv.org/abs/1606.08415
    """
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class RotaryPositionalEmbeddings(nn.Module):
    """RoPE (handout section 5): rotate-half, positions 1..T, theta_i = base^(-2(i-1)/d)."""

    def __init__(self, d: int, base: int = 10_000):
        super().__init__()
        self.d = d
        self.base = base
        self.cache = None  # (cos, sin), each (T, d); built on the first forward

    def _build_cache(self, Y: torch.Tensor):
        T = Y.shape[-2]
        theta = 1.0 / (self.base ** (torch.arange(0, self.d, 2, device=Y.device).double() / self.d))
        pos = torch.arange(1, T + 1, device=Y.device).double()
        C = repeat(torch.einsum('t,i->ti', pos, theta), 't i -> t (two i)', two=2)
        self.cache = (C.cos().to(Y.dtype), C.sin().to(Y.dtype))

    def forward(self, Y: torch.Tensor) -> torch.Tensor:
        T = Y.shape[-2]
        if self.cache is None or self.cache[0].shape[0] < T or self.cache[0].dtype != Y.dtype \
                or self.cache[0].device != Y.device:
            self._build_cache(Y)
        cos, sin = self.cache[0][:T], self.cache[1][:T]
        Y1, Y2 = Y[..., :self.d // 2], Y[..., self.d // 2:]
        return Y * cos + torch.cat((-Y2, Y1), dim=-1) * sin


class CausalSelfAttention(nn.Module):
    """
    A vanilla multi-head masked self-attention layer with a projection at the end.
    It is possible to use torch.nn.MultiheadAttention here but I am including an
    explicit implementation here to show that there is nothing too scary here.
    """

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_query_head == 0
        # query, key, value projections for all heads
        self.q_proj = nn.Linear(config.n_embd, config.n_embd)
        self.k_proj = nn.Linear(config.n_embd, config.n_embd)
        self.v_proj = nn.Linear(config.n_embd, config.n_embd)
        # output projection
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)
        # regularization
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        # causal mask to ensure that attention is only applied to the left in the input sequence
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))
        self.n_head = config.n_query_head
        self.n_embd = config.n_embd
        self.rope = config.rope
        if self.rope:
            self.query_rotary_pe = RotaryPositionalEmbeddings(config.n_embd // config.n_query_head)
            self.key_rotary_pe = RotaryPositionalEmbeddings(config.n_embd // config.n_query_head)

    def forward(self, x):
        B, T, C = x.size()
        q = rearrange(self.q_proj(x), 'b t (h d) -> b h t d', h=self.n_head)
        k = rearrange(self.k_proj(x), 'b t (h d) -> b h t d', h=self.n_head)
        v = rearrange(self.v_proj(x), 'b t (h d) -> b h t d', h=self.n_head)
        if self.rope:
            q = self.query_rotary_pe(q)
            k = self.key_rotary_pe(k)

        if x.device.type == 'cuda':
            torch.cuda.empty_cache()
            start = torch.cuda.memory_allocated()
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = self.bias[:, :, :T, :T]
        att = att.masked_fill(mask == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        mem = torch.cuda.memory_allocated() - start if x.device.type == 'cuda' else float('nan')

        y = rearrange(y, 'b h t d -> b t (h d)')
        y = self.resid_dropout(self.out_proj(y))
        return y, mem


class GroupedQueryAttention(nn.Module):
    """GQA: n_kv_head key/value heads, each shared by g = n_query_head // n_kv_head query heads."""

    def __init__(self, config):
        super().__init__()
        assert config.n_embd % config.n_query_head == 0
        assert config.n_query_head % config.n_kv_head == 0
        self.n_head = config.n_query_head
        self.n_kv_head = config.n_kv_head
        self.head_dim = config.n_embd // config.n_query_head
        self.q_proj = nn.Linear(config.n_embd, config.n_embd)
        self.k_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)
        self.v_proj = nn.Linear(config.n_embd, self.n_kv_head * self.head_dim)
        self.out_proj = nn.Linear(config.n_embd, config.n_embd)
        self.attn_dropout = nn.Dropout(config.attn_pdrop)
        self.resid_dropout = nn.Dropout(config.resid_pdrop)
        self.register_buffer("bias", torch.tril(torch.ones(config.block_size, config.block_size))
                                     .view(1, 1, config.block_size, config.block_size))
        self.rope = config.rope
        if self.rope:
            self.query_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)
            self.key_rotary_pe = RotaryPositionalEmbeddings(self.head_dim)

    def forward(self, x):
        B, T, C = x.size()
        g = self.n_head // self.n_kv_head
        q = rearrange(self.q_proj(x), 'b t (h d) -> b h t d', h=self.n_head)
        k = rearrange(self.k_proj(x), 'b t (h d) -> b h t d', h=self.n_kv_head)
        v = rearrange(self.v_proj(x), 'b t (h d) -> b h t d', h=self.n_kv_head)
        if self.rope:
            q = self.query_rotary_pe(q)
            k = self.key_rotary_pe(k)
        # query heads i*g .. i*g+g-1 share KV head i
        k = repeat(k, 'b h t d -> b (h g) t d', g=g)
        v = repeat(v, 'b h t d -> b (h g) t d', g=g)

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
            start = torch.cuda.memory_allocated()
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.head_dim))
        mask = torch.tril(torch.ones(T, T, device=x.device), diagonal=1).view(1, 1, T, T)
        att = att.masked_fill(mask == 0, float('-inf'))
        att = F.softmax(att, dim=-1)
        att = self.attn_dropout(att)
        y = att @ v
        mem = torch.cuda.memory_allocated() - start if torch.cuda.is_available() else float('nan')

        y = rearrange(y, 'b h t d -> b t (h d)')
        y = self.resid_dropout(self.out_proj(y))
        return y, mem


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
        self.mlpf = lambda x: m.dropout(m.c_proj(m.act(m.c_fc(x)))) # MLP forward

    def forward(self, x):
        if x.is_cuda:
            torch.cuda.synchronize()
        t0 = time.time()
        attn_out, attn_mem = self.attn(self.ln_1(x))
        if x.is_cuda:
            torch.cuda.synchronize()
        attn_time = time.time() - t0
        x = x + attn_out
        x = x + self.mlpf(self.ln_2(x))
        return x, attn_time, attn_mem


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

    def load_pretrained(self, model_path):
        # given code: continue training a model saved by chargpt.py at a shorter block size
        with open(os.path.join(model_path, 'config.json'), 'r') as f:
            old_block_size = json.load(f)['data']['block_size']
        pretrained_state = torch.load(os.path.join(model_path, 'model.pt'))
        new_state = self.state_dict()
        for k, v in pretrained_state.items():
            if k not in new_state:
                continue
            if k == 'transformer.wpe.weight' and v.shape != new_state[k].shape:
                new_state[k][:old_block_size, :] = v[:old_block_size, :]
            elif k.endswith('.attn.bias') and v.shape != new_state[k].shape:
                new_state[k][:, :, :old_block_size, :old_block_size] = v[:, :, :old_block_size, :old_block_size]
            else:
                new_state[k] = v
        self.load_state_dict(new_state)

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
        tok_emb = self.transformer.wte(idx) # token embeddings of shape (b, t, n_embd)
        if self.rope:
            x = self.transformer.drop(tok_emb)
        else:
            pos = torch.arange(0, t, dtype=torch.long, device=device).unsqueeze(0) # shape (1, t)
            pos_emb = self.transformer.wpe(pos) # position embeddings of shape (1, t, n_embd)
            x = self.transformer.drop(tok_emb + pos_emb)
        attn_times, attn_mems = [], []
        for block in self.transformer.h:
            x, attn_time, attn_mem = block(x)
            attn_times.append(attn_time)
            attn_mems.append(attn_mem)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)

        # if we are given some desired targets also calculate the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss, sum(attn_times) / len(attn_times), sum(attn_mems) / len(attn_mems)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, do_sample=False, top_k=None):
        """
        Take a conditioning sequence of indices idx (LongTensor of shape (b,t)) and complete
        the sequence max_new_tokens times, feeding the predictions back into the model each time.
        Most likely you'll want to make sure to be in model.eval() mode of operation for this.
        """
        attn_times = []
        for _ in range(max_new_tokens):
            # if the sequence context is growing too long we must crop it at block_size
            idx_cond = idx if idx.size(1) <= self.block_size else idx[:, -self.block_size:]
            # forward the model to get the logits for the index in the sequence
            logits, _, attn_time, _ = self(idx_cond)
            attn_times.append(attn_time)
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

        return idx, sum(attn_times) / len(attn_times)
