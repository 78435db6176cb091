"""
Plots of your runs for the empirical questions (handout 5.4 - 5.7): give it run folders
(chargpt.py's --system.work_dir; each holds config.json and train_logs.json).

    python plot_logs.py loss out/vanilla16 out/vanilla256 out/rope16 out/rope256 -o loss.png
    python plot_logs.py attn out/kv1 out/kv2 out/kv3 out/kv6 -o attn_time.png

`loss` draws one training-loss curve per run. A run started with --model.pretrained_folder
continues the x-axis of that folder's run (config.json records pretrained_folder), so the
600 iterations at block size 16 and the 600 at 256 form one curve of 1200 iterations.
`attn` draws the mean attention time per iteration (ms) against n_kv_head (handout 5.5).
An interrupted run is plotted as far as it got: chargpt.py keeps train_logs.json up to date.
Needs matplotlib (pip install matplotlib); the functions that read the runs do not.
"""

import argparse
import json
import os
import sys


def load_run(folder):
    """{'folder', 'config', 'logs'} of one run folder (config.json and train_logs.json)."""
    run = {'folder': os.path.realpath(folder)}
    for key, name in (('config', 'config.json'), ('logs', 'train_logs.json')):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise FileNotFoundError('%s has no %s: is it a run folder of chargpt.py (--system.work_dir)?'
                                    % (folder, name))
        with open(path) as f:
            run[key] = json.load(f)
    return run


def parent_folder(run, folders):
    """
    Which of `folders` (real paths) this run continued from (--model.pretrained_folder), or
    None. The flag was relative to where chargpt.py ran, and runs get moved (Colab to your
    machine), so a parent that is not found by path is matched by its folder name.
    """
    parent = run['config'].get('model', {}).get('pretrained_folder')
    if parent is None:
        return None
    for base in (os.getcwd(), os.path.dirname(os.path.dirname(run['folder']))):
        candidate = os.path.realpath(os.path.join(base, parent))
        if candidate in folders:
            return candidate
    same_name = [f for f in folders if os.path.basename(f) == os.path.basename(os.path.normpath(parent))]
    return same_name[0] if len(same_name) == 1 else None


def loss_curves(folders):
    """
    [(label, xs, losses)]: one curve per chain of runs. A run whose parent folder is among
    `folders` extends the parent's curve, its iterations numbered after the parent's; the
    chain is labelled by its folder names joined with '+'.
    """
    runs = [load_run(folder) for folder in folders]
    by_folder = {run['folder']: run for run in runs}
    parents = {run['folder']: parent_folder(run, by_folder) for run in runs}
    # continuing in the same folder overwrote the parent's logs: nothing to join there
    parents = {folder: (None if parent == folder else parent) for folder, parent in parents.items()}
    continued = set(parents.values())
    curves = []
    for run in runs:
        if run['folder'] in continued:
            continue  # drawn as the first part of its continuation's curve
        chain = [run]
        while parents[chain[0]['folder']] is not None and len(chain) <= len(runs):  # bounded: no loops
            chain.insert(0, by_folder[parents[chain[0]['folder']]])
        xs, losses = [], []
        for part in chain:
            own = part['logs']['train_losses']
            xs.extend(range(len(xs), len(xs) + len(own)))
            losses.extend(own)
        curves.append(('+'.join(os.path.basename(part['folder']) for part in chain), xs, losses))
    return curves


def attention_times(folders):
    """[(n_kv_head, mean attention ms per iteration, folder name)], sorted by n_kv_head."""
    points = []
    for folder in folders:
        run = load_run(folder)
        model = run['config'].get('model', {})
        n_kv_head = model.get('n_kv_head') or model.get('n_query_head')
        times = run['logs']['attn_times']  # seconds per forward, averaged over the layers
        if not times:
            raise ValueError('%s: train_logs.json has no iterations yet' % folder)
        points.append((n_kv_head, 1000.0 * sum(times) / len(times), os.path.basename(run['folder'])))
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
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    for label, xs, losses in loss_curves(folders):
        ax.plot(xs, losses, label=label, linewidth=1)
    ax.set_xlabel('iteration')
    ax.set_ylabel('training loss (nats per character)')
    ax.legend()
    fig.savefig(output, dpi=120, bbox_inches='tight')


def plot_attention_times(folders, output):
    plt = _pyplot()
    points = attention_times(folders)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot([p[0] for p in points], [p[1] for p in points], marker='o')
    ax.set_xlabel('n_kv_head')
    ax.set_ylabel('mean attention time per iteration (ms)')
    fig.savefig(output, dpi=120, bbox_inches='tight')


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
