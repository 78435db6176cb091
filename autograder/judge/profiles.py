"""
grading.yaml's `profiles:` entries, typed: one frozen Profile per profile (cpu, gpu), one small
frozen dataclass per section. config.py validates the YAML against the schema these fields declare
(`schema()`) and builds them with `Profile.from_mapping`; the harness and staff code read
`profile.loss_curve.student_seed`. The probe process gets `profile.as_json()` inside its job and
reads plain dicts. Lists are tuples here, so a profile is hashable and nothing can change it in place.
grading.yaml's comments say why each value is what it is.
"""

import dataclasses
import json
import typing
from dataclasses import dataclass
from typing import Tuple


class _ReadsAsDict:
    """
    x['name'] as well as x.name: judge/inputs.py and contract/configs.py read profiles that way, because
    the child passes the same functions the job's dict, and their bytes are in the fixtures' probe-code
    hash (fixtures.PROBE_CODE: editing them makes every fixture stale until a regenerate).
    """
    __slots__ = ()

    def __getitem__(self, name):
        return getattr(self, name)


@dataclass(frozen=True)
class ModuleSizes(_ReadsAsDict):
    """`module`: the attention modules probed alone (MHA, GQA and their RoPE variants, dropout, causality)."""
    n_embd: int          # embedding width of the module
    n_query_head: int    # query heads (the GQA cases take their n_kv_head from kv_heads)
    block_size: int      # the config's block_size (the causal mask's size)
    batch: int           # batch of the module's input x
    seq: int             # sequence length of x


@dataclass(frozen=True)
class ModelSizes(_ReadsAsDict):
    """`model`: the whole GPT probed on given weights (logits, loss, generate)."""
    n_layer: int         # transformer blocks
    n_embd: int          # embedding width
    n_query_head: int    # query heads per block
    vocab_size: int      # token ids drawn below this (the corpus's 65 characters)
    block_size: int      # the config's block_size (generate crops to it)
    batch: int           # batch of the token ids
    seq: int             # sequence length of the token ids


@dataclass(frozen=True)
class MemorySettings(_ReadsAsDict):
    """`memory`: test 9.1, the attention's memory measured around the GQA core."""
    batch: int           # batch of the measured input
    seq: int             # sequence length of the measured input
    warmup_batch: int    # the warm-up call's batch, larger, so a peak never reset reads high
    attn_pdrop: float    # attention dropout of the measured module
    floor: str           # what the least allocation is: 'weights' (the (T, T) weights) or 'output' (GPU)


@dataclass(frozen=True)
class SlidingWindowSettings(_ReadsAsDict):
    """`sliding_window`: tests 11.1 (banded attention's values) and 11.2 (its memory)."""
    window: int            # 11.1's window
    seq: int               # 11.1's sequence length
    memory_seq: int        # 11.2's sequence length N, where an N x N float32 matrix cannot fit
    memory_heads: int      # 11.2's heads
    memory_head_dim: int   # 11.2's head size
    memory_window: int     # 11.2's window
    memory_rows: int       # output rows of 11.2 the fixtures keep and the harness compares
    memory_margin_mb: int  # 11.2's address-space limit above the process's size


@dataclass(frozen=True)
class LossCurveSettings(_ReadsAsDict):
    """`loss_curve`: test 10.1, a short training on the corpus from harness-given weights."""
    n_layer: int                     # transformer blocks of the trained GPT
    n_embd: int                      # its embedding width
    n_query_head: int                # its query heads
    n_kv_head: int                   # its key/value heads (GQA)
    rope: bool                       # whether it uses RoPE
    block_size: int                  # training sequence length
    batch_size: int                  # training batch
    iters: int                       # training steps
    learning_rate: float             # the trainer's learning rate
    reference_seeds: Tuple[int, ...]  # seeds the reference trains at (the fixtures' spread of final losses)
    student_seed: int                # the seed the submission trains at
    window: int                      # the final loss is the mean of the last `window` steps
    heldout_seqs: int                # held-out sequences the trained model's logits are scored on


@dataclass(frozen=True)
class WorkflowSettings(_ReadsAsDict):
    """`workflow`: test 10.3, training at one block size and continuing at a larger one (handout 5.2/5.7)."""
    block_from: int      # the first block size
    block_to: int        # the block size it continues at


@dataclass(frozen=True)
class DropoutSettings(_ReadsAsDict):
    """`dropout`: test 6.1, the share of attention weights dropped in train mode."""
    p: float             # the dropout probability
    seq: int             # sequence length (each output element is one attention weight)


@dataclass(frozen=True)
class Profile(_ReadsAsDict):
    """One entry of grading.yaml's `profiles:`: the device, seeds and sizes every probe runs at."""
    device: str                                 # 'cpu' or 'cuda'
    seed: int                                   # seed of the shared inputs (and of each input set's HMAC)
    module: ModuleSizes                         # the attention modules probed alone
    model: ModelSizes                           # the whole GPT probed on given weights
    rope_cases: Tuple[Tuple[int, ...], ...]     # RoPE checked alone on (B, nh, T, d) each
    kv_heads: Tuple[int, ...]                   # the n_kv_head values of the GQA cases
    memory: MemorySettings                      # test 9.1
    sliding_window: SlidingWindowSettings       # tests 11.1 and 11.2
    loss_curve: LossCurveSettings               # test 10.1 (and 10.2's first step)
    workflow: WorkflowSettings                  # test 10.3
    dropout: DropoutSettings                    # test 6.1
    input_sets: int                             # input sets the fixtures hold, one drawn per submission

    @classmethod
    def from_mapping(cls, values):
        """
        From a validated profile (config.py): sections become their dataclasses, lists tuples. Values stay
        as YAML gave them (an int where a float is allowed stays an int), so that as_json() and
        Grading.profile_hash give the bytes the fixtures' manifest and the child expect.
        """
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            value, kind = values[f.name], hints[f.name]
            if dataclasses.is_dataclass(kind):
                value = kind(**{k: _frozen(v) for k, v in value.items()})
            kwargs[f.name] = _frozen(value)
        return cls(**kwargs)

    def as_json(self):
        """The plain dict grading.yaml gave, keys in the same order: what the probe job carries (the JSON round
        trip turns the tuples back into lists)."""
        return json.loads(json.dumps(dataclasses.asdict(self)))


SECTIONS = {f.name: f.type for f in dataclasses.fields(Profile) if dataclasses.is_dataclass(f.type)}


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def schema():
    """
    (keys, sections, lists) in config.py's terms, from the fields above: keys {profile key: its YAML type},
    sections {section: {key: kind}}, lists {list key: kind}, where a kind is a type, a tuple of types, or
    ('list', kind) for a list of that kind.
    """
    hints = typing.get_type_hints(Profile)
    keys = {f.name: _yaml_type(hints[f.name]) for f in dataclasses.fields(Profile)}
    sections = {name: {k: _kind(t) for k, t in typing.get_type_hints(cls).items()} for name, cls in SECTIONS.items()}
    lists = {name: _kind(hints[name]) for name, t in keys.items() if t is list}
    return keys, sections, lists


def _yaml_type(hint):
    if dataclasses.is_dataclass(hint):
        return dict
    return list if typing.get_origin(hint) is tuple else hint


def _kind(hint):
    if typing.get_origin(hint) is tuple:
        return ('list', _kind(typing.get_args(hint)[0]))
    return (int, float) if hint is float else hint
