"""
The torch.cuda stand-ins of autograder/child/cuda_meter.py (installed in the sandbox on the cpu
profile): the course's starter code, which measures with torch.cuda.memory_allocated() before
and after the attention, must read real bytes on a CPU machine, and every reading is recorded.
"""

import pytest
import torch

from autograder.child import cuda_meter


@pytest.fixture
def stand_ins(monkeypatch):
    for name, fn in cuda_meter.STAND_INS.items():
        monkeypatch.setattr(torch.cuda, name, fn)


def course_forward(lin, x):
    torch.cuda.empty_cache()
    torch.cuda.synchronize()
    start = torch.cuda.memory_allocated()
    y = lin(x).relu()
    return y, torch.cuda.memory_allocated() - start


def test_course_style_measures_real_bytes_on_cpu(stand_ins):
    lin, x = torch.nn.Linear(8, 16), torch.randn(4, 8)
    with cuda_meter.Meter() as meter:
        y, mem = course_forward(lin, x)
    # the relu output (4 x 16 float32) is alive at the second reading; the linear output died with its statement
    assert mem == 4 * 16 * 4
    assert [kind for kind, _ in meter.readings] == [cuda_meter.ALLOCATED, cuda_meter.ALLOCATED]
    assert meter.readings[1][1] - meter.readings[0][1] == mem
    assert meter.live == 4 * 16 * 4 and meter.peak == 2 * 4 * 16 * 4   # the intermediate died with the call
    assert torch.cuda.memory_allocated() == 0   # no meter running: what CPU torch answers


def test_peak_queries_follow_resets(stand_ins):
    with cuda_meter.Meter() as meter:
        a = torch.ones(100)
        del a
        torch.cuda.reset_peak_memory_stats()
        b = torch.ones(10)
        assert torch.cuda.max_memory_allocated() == 40
        assert torch.cuda.memory_stats()['allocated_bytes.all.current'] == 40
    assert meter.peak == 400 and b.numel() == 10


def test_forced_is_cuda_is_undone():
    with cuda_meter.ForcedIsCuda():
        assert torch.randn(2).is_cuda and (torch.randn(2) + 1).is_cuda
    assert not torch.randn(2).is_cuda


def test_attention_memory_figures_are_recorded():
    class Meter:
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.net_bytes, self.peak_bytes = 12, 34
            return False
    with cuda_meter.MeterFigures(Meter) as figures:
        with Meter():
            pass
    assert figures.figures == [(12, 34)]
    with Meter():   # restored: nothing more recorded
        pass
    assert figures.figures == [(12, 34)]
