"""
Trains a character-level language model on the works of Shakespeare (handout section 5).

    python chargpt.py --trainer.max_iters=600 --model.rope=True
    python chargpt.py --help                  # every flag, with its default

The run folder (--system.work_dir) receives what the course's chargpt.py writes: args.txt,
config.json, model.pt (every 500 iterations and at the end) and the three per-iteration lists of
LOG_FILES (null where memory is not measured, as on a CPU), rewritten every LOG_EVERY iterations
and when the run ends, by Ctrl-C or an error too. Nothing is written before mingpt/preflight.py has
checked the flags, the corpus, the prompt, the pretrained folder and one forward pass.
"""

import sys

import torch
from torch.utils.data import Dataset

from mingpt.model import GPT
from mingpt.trainer import Trainer
from mingpt.utils import set_seed, setup_logging, CfgNode as CN, ConfigError
from mingpt.utils import LOG_FILES, StopOnCtrlC, memory_measured, save_model, write_logs
from mingpt.preflight import Stop, stops_on, usage, read_corpus, find_input_file, torch_threads  # noqa: F401
from mingpt.preflight import check_settings, check_folders, check_prompt, continuing, model_refusal
from mingpt.preflight import load_refusal, what_was_loaded

# the start of the samples printed during training. Handout 5.1 and 5.2: replace it with the first
# line of your favourite play (only characters that occur in input.txt: the model knows no others)
PROMPT = "O God, O God!"
LOG_EVERY = 10            # how often (in iterations) the per-iteration lists are rewritten during a run
HANDOUT_VOCAB_SIZE = 65   # the handout quotes 65 characters for Karpathy's tinyshakespeare; other corpora differ

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


def prepare(argv):
    """(config, dataset): the flags, the corpus and the prompt, checked; nothing written yet."""
    config = get_config()
    with stops_on(ConfigError):
        config.merge_from_args(argv)
        check_settings(config)
        check_folders(config)
        text = read_corpus(config.data.input_file)
    print(config)
    set_seed(config.system.seed)
    train_dataset = CharDataset(config.data, text)
    config.model.vocab_size = train_dataset.get_vocab_size()
    config.model.block_size = train_dataset.get_block_size()
    with stops_on(ConfigError):
        check_prompt(PROMPT, train_dataset.stoi)
    return config, train_dataset


def build(config, train_dataset):
    """(model, trainer): GPT (it fills in the sizes config.json records), the earlier run, one forward pass."""
    source = config.model.pretrained_folder
    with stops_on(NotImplementedError, code=1), stops_on(AssertionError, ValueError, say=model_refusal), \
            stops_on(ConfigError), continuing(config.model, source):   # another model than source's: exit 2
        model = GPT(config.model)   # a TODO these flags need is named with exit 1, a refused size with exit 2
    if source is not None:
        try:
            model.load_pretrained(source)
        except NotImplementedError:
            raise
        except Exception as e:  # noqa: BLE001  (any failure to load is a mismatch of this run and that one)
            raise Stop(load_refusal(source, e)) from None
        print(what_was_loaded(model, source, config.model.block_size))
    trainer = Trainer(config.trainer, model, train_dataset)
    with stops_on(NotImplementedError, code=1), torch.random.fork_rng(devices=[]), torch.no_grad():
        model.eval()   # one forward pass, off the seed's random stream (fork_rng): training draws as without it
        model(torch.zeros((1, config.model.block_size), dtype=torch.long, device=trainer.device))
    model.train()
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
