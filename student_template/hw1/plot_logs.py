"""
Plots of your runs for the empirical questions (handout 5.4 - 5.7): give it run folders
(chargpt.py's --system.work_dir; each holds config.json and the per-iteration lists).

    python plot_logs.py loss out/vanilla16 out/vanilla256 out/rope16 out/rope256 -o loss.png
    python plot_logs.py attn out/kv1 out/kv2 out/kv3 out/kv6 -o attn_time.png

`loss` draws one training-loss curve per run. A run started with --model.pretrained_folder
continues the x-axis of that folder's run (config.json records pretrained_folder), so the
600 iterations at block size 16 and the 600 at 256 form one curve of 1200 iterations; a
dashed line marks where the block size changes. `attn` draws the mean attention time per
iteration (ms) against n_kv_head (handout 5.5).

Runs that cannot be compared are refused with the setting that differs: loss curves with
another block-size schedule, batch size, learning rate or corpus; attention times of runs
that differ in anything but n_kv_head, or of a GPU run beside a CPU run. An interrupted run
is plotted as far as it got. Needs matplotlib (pip install matplotlib); the functions that
read the runs do not.
"""

import argparse
import json
import os
import sys

# the per-iteration lists chargpt.py writes into a run folder
LOG_FILES = {'train_losses': 'train_losses.json', 'attn_times': 'attention_computation_time.json',
             'attn_mem': 'attention_computation_memory.json'}
# what two loss curves must share to be drawn on one plot (besides the block-size schedule)
SAME_FOR_LOSS = (('trainer', 'batch_size'), ('trainer', 'learning_rate'), ('model', 'vocab_size'))
# what the runs of an attention-time plot must share: everything about the model and its input but n_kv_head
SAME_FOR_ATTN = (('data', 'block_size'), ('model', 'n_layer'), ('model', 'n_query_head'), ('model', 'n_embd'),
                 ('model', 'rope'), ('model', 'sliding_window'), ('trainer', 'batch_size'))


class NotComparable(ValueError):
    """The runs given cannot be drawn on one plot; the message names the setting that differs."""


def load_run(folder):
    """{'folder', 'name', 'config', 'logs'} of one run folder (config.json and the per-iteration lists)."""
    run = {'folder': os.path.realpath(folder), 'name': os.path.basename(os.path.normpath(folder)), 'logs': {}}
    path = os.path.join(folder, 'config.json')
    if not os.path.isfile(path):
        raise FileNotFoundError('%s has no config.json: is it a run folder of chargpt.py (--system.work_dir)?' % folder)
    with open(path) as f:
        run['config'] = json.load(f)
    for key, name in LOG_FILES.items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise FileNotFoundError('%s has no %s: the run stopped before its first %s was written, or it was made '
                                    'by an older chargpt.py' % (folder, name, name))
        with open(path) as f:
            run['logs'][key] = json.load(f)
    return run


def setting(run, section, key):
    return run['config'].get(section, {}).get(key)


def parent_folder(run, folders):
    """
    Which of `folders` (real paths) this run continued from (--model.pretrained_folder), or
    None. The flag was relative to where chargpt.py ran, and runs get moved (Colab to your
    machine), so a parent that is not found by path is matched by its folder name.
    """
    parent = setting(run, 'model', 'pretrained_folder')
    if parent is None:
        return None
    for base in (os.getcwd(), os.path.dirname(os.path.dirname(run['folder']))):
        candidate = os.path.realpath(os.path.join(base, parent))
        if candidate in folders:
            return candidate
    same_name = [f for f in folders if os.path.basename(f) == os.path.basename(os.path.normpath(parent))]
    return same_name[0] if len(same_name) == 1 else None


def chains(runs):
    """Lists of runs, each a run followed by the runs that continued it (its parent first)."""
    by_folder = {run['folder']: run for run in runs}
    parents = {run['folder']: parent_folder(run, by_folder) for run in runs}
    # continuing in the same folder overwrote the parent's logs: nothing to join there
    parents = {folder: (None if parent == folder else parent) for folder, parent in parents.items()}
    continued = set(parents.values())
    result = []
    for run in runs:
        if run['folder'] in continued:
            continue  # drawn as the first part of its continuation's curve
        chain = [run]
        while parents[chain[0]['folder']] is not None and len(chain) <= len(runs):  # bounded: no loops
            chain.insert(0, by_folder[parents[chain[0]['folder']]])
        result.append(chain)
    return result


def schedule(chain):
    """'600 at block 16, then 600 at block 256': each part's configured iterations and block size."""
    parts = []
    for run in chain:
        iters = setting(run, 'trainer', 'max_iters')
        parts.append('%s at block %s' % (iters if iters is not None else 'until Ctrl-C',
                                         setting(run, 'data', 'block_size')))
    return ', then '.join(parts)


def _label(chain):
    return '+'.join(run['name'] for run in chain)


def _refuse_unless_equal(groups, what, describe):
    """NotComparable when `describe` differs between the groups (chains or runs)."""
    seen = {}
    for group in groups:
        seen.setdefault(describe(group), []).append(_label(group if isinstance(group, list) else [group]))
    if len(seen) > 1:
        raise NotComparable('these runs cannot share one plot: their %s differs (%s); plot them separately, or rerun '
                            'them with the same settings' % (what, '; '.join('%s: %s' % (', '.join(names), value)
                                                                             for value, names in seen.items())))


def loss_curves(folders):
    """
    [(label, xs, losses, switches)]: one curve per chain of runs. A run whose parent folder is
    among `folders` extends the parent's curve, its iterations numbered after the parent's;
    `switches` holds (iteration, old block size, new block size) where the block size changes.
    """
    found = chains([load_run(folder) for folder in folders])
    _refuse_unless_equal(found, 'block-size schedule', schedule)
    for section, key in SAME_FOR_LOSS:
        _refuse_unless_equal(found, '%s.%s' % (section, key), lambda chain: setting(chain[0], section, key))
    curves = []
    for chain in found:
        xs, losses, switches = [], [], []
        for previous, part in zip([None] + chain, chain):
            old = setting(previous, 'data', 'block_size') if previous else None
            new = setting(part, 'data', 'block_size')
            if previous is not None and old != new:
                switches.append((len(xs), old, new))
            own = part['logs']['train_losses']
            xs.extend(range(len(xs), len(xs) + len(own)))
            losses.extend(own)
        curves.append((_label(chain), xs, losses, switches))
    return curves


def attention_times(folders):
    """[(n_kv_head, mean attention ms per iteration, folder name)], sorted by n_kv_head."""
    runs = [load_run(folder) for folder in folders]
    for section, key in SAME_FOR_ATTN:
        _refuse_unless_equal(runs, '%s.%s' % (section, key), lambda run: setting(run, section, key))
    # memory is measured on a GPU only: a run with figures beside one without mixes a GPU and a CPU
    _refuse_unless_equal(runs, 'device (attention memory was measured, so on a GPU)',
                         lambda run: any(m is not None for m in run['logs']['attn_mem']))
    points = []
    for run in runs:
        n_kv_head = setting(run, 'model', 'n_kv_head') or setting(run, 'model', 'n_query_head')
        times = [t for t in run['logs']['attn_times'] if t is not None]  # seconds per forward, averaged over layers
        if not times:
            raise ValueError('%s: attention_computation_time.json has no iterations yet' % run['name'])
        points.append((n_kv_head, 1000.0 * sum(times) / len(times), run['name']))
    kv = [p[0] for p in points]
    if len(set(kv)) < len(kv):
        raise NotComparable('two runs have the same n_kv_head (%s): give one run per n_kv_head'
                            % ', '.join('%s: %s' % (p[2], p[0]) for p in points if kv.count(p[0]) > 1))
    return sorted(points, key=lambda point: (point[0] is None, point[0] or 0))


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        sys.exit('plot_logs.py draws with matplotlib, which is not installed: pip install matplotlib')
    matplotlib.use('Agg')  # files only: works without a display (Colab, ssh)
    import matplotlib.pyplot as plt
    return plt


def plot_losses(folders, output):
    curves = loss_curves(folders)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, xs, losses, _ in curves:
        ax.plot(xs, losses, label=label, linewidth=1)
    # every curve follows the same schedule (loss_curves refuses others): one line per switch
    for x, old, new in curves[0][3]:
        ax.axvline(x, color='gray', linestyle='--', linewidth=1)
        ax.annotate('block %s \u2192 %s' % (old, new), (x, 1.0), xycoords=('data', 'axes fraction'),
                    xytext=(4, -14), textcoords='offset points', color='gray')
    ax.set_xlabel('iteration')
    ax.xaxis.set_major_locator(_whole_numbers())
    ax.set_ylabel('training loss (nats per character)')
    ax.legend()
    fig.savefig(output, dpi=120, bbox_inches='tight')
    return fig


def _whole_numbers():
    from matplotlib.ticker import MaxNLocator
    return MaxNLocator(integer=True)


def plot_attention_times(folders, output):
    points = attention_times(folders)
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], marker='o')
    ax.set_xlabel('n_kv_head')
    ax.xaxis.set_major_locator(_whole_numbers())   # a count of heads: no 1.5 tick
    ax.set_ylabel('mean attention time per iteration (ms)')
    fig.savefig(output, dpi=120, bbox_inches='tight')
    return fig


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0].strip())
    parser.add_argument('kind', choices=('loss', 'attn'), help='loss curves, or attention time against n_kv_head')
    parser.add_argument('folders', nargs='+', help='run folders (--system.work_dir of chargpt.py)')
    parser.add_argument('-o', '--output', help='image to write (default: <kind>.png)')
    opts = parser.parse_args(argv)
    output = opts.output or opts.kind + '.png'
    try:
        (plot_losses if opts.kind == 'loss' else plot_attention_times)(opts.folders, output)
    except (FileNotFoundError, ValueError) as e:
        print('error: %s' % e, file=sys.stderr)
        return 2
    print('wrote %s' % output)
    return 0


if __name__ == '__main__':
    sys.exit(main())
