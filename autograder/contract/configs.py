"""
Labels and configurations that both sides need: the harness builds inputs and fixtures for
them, the probes run them. Standard library only (the harness imports this without torch).
"""

# full-model configurations probed: label -> (n_kv_head or None for n_query_head, rope).
# No vanilla configuration: it runs only given code, and a test credits the student's own work.
MODEL_CONFIGS = (('rope', None, True), ('gqa', 2, False), ('rope-gqa', 3, True))


def attention_configs(profile):
    """The attention weight sets: label -> (n_kv_head, rope)."""
    nh = profile['module']['n_query_head']
    configs = {'mha': (nh, False), 'mha-rope': (nh, True)}
    for kv in profile['kv_heads']:
        configs['gqa-kv%d' % kv] = (kv, False)
        configs['gqa-rope-kv%d' % kv] = (kv, True)
    return configs


def model_configs(profile):
    """The GPT state dicts: label -> (n_kv_head, rope)."""
    nh = profile['model']['n_query_head']
    return {label: (kv or nh, rope) for label, kv, rope in MODEL_CONFIGS}


# new tokens of the short generation checks (prompt + GENERATE_NEW stays within block_size)
GENERATE_NEW = 12

# GPT configurations of the optional KV-cache test (12.1): label -> n_kv_head, rope (weights of MODEL_CONFIGS)
KV_CACHE_CONFIGS = (('rope-gqa', 3, True), ('gqa', 2, False))
