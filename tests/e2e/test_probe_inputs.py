"""
inputs.probe_inputs declares, per probe, the only inputs its process receives (inputs.for_probe).
Here the reference runs every probe in a child of its own that gets only those inputs, and must
complete it without a case error, with the outputs the fixtures hold: a declaration that misses
a key would fail the probe for every student once each probe runs in a process of its own.
About one child start per probe (~1 min on two cores).
"""

import numpy as np
import pytest

from autograder import REFERENCE_DIR, config, fixtures, inputs, registry
from autograder.grade import expected_outputs
from autograder.sandbox import Sandbox

GRADING = config.load()
PROFILE = GRADING.profiles['cpu']
REFERENCE = REFERENCE_DIR + '/mingpt/model.py'


@pytest.fixture(scope='module')
def world():
    fx = fixtures.load(GRADING, 'cpu')
    return Sandbox(GRADING.sandbox), fx, inputs.build(PROFILE)


@pytest.mark.parametrize('probe', [p for p in registry.PROBED if p not in ('memory', 'sliding-window-memory')])
def test_each_probe_runs_on_its_declared_inputs_alone(world, probe):
    sandbox, fx, everything = world
    own = inputs.for_probe(PROFILE, probe, everything)
    job = {'profile': PROFILE, 'loss_curve_seeds': [PROFILE['loss_curve']['student_seed']]}
    run = sandbox.run(REFERENCE, job, [probe], own, {probe: 300}, import_timeout=120,
                      need_data=probe == 'loss-curve', expected=expected_outputs(fx, [probe], PROFILE))
    result = run.probes[probe]
    assert result.status == 'ok', (result.status, result.message)
    assert not result.info.get('case_errors'), result.info['case_errors']
    expected = fx.probe(probe)
    for key, value in result.arrays.items():
        if key in expected and value.dtype.kind in 'iu':
            assert np.array_equal(value, expected[key]), key
