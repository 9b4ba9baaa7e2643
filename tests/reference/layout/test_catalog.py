"""The model catalog expands to the published parameter counts (the papers are the oracle)."""

import pytest

from reference.layout.catalog import load_catalog, model_names, model_specs


@pytest.mark.parametrize("name", model_names())
def test_expanded_params_match_the_published_count(name):
    got = sum(s.numel for s in model_specs(name))
    published = load_catalog()[name]["published_params"]
    assert abs(got / published - 1) < 0.005, f"{name} params: got {got:,}, but should be within 0.5% of {published:,.0f}"


def test_tied_models_flag_one_shared_embedding():
    for name in model_names():
        shared = [s.name for s in model_specs(name) if s.shared_embedding]
        tied = load_catalog()[name]["tied_embeddings"]
        assert shared == (["embedding.word_embeddings.weight"] if tied else []), f"{name}: got {shared}"


def test_unknown_model_names_the_valid_ones():
    with pytest.raises(ValueError, match="model: got 'gpt5', but should be one of gpt3-175b"):
        model_specs("gpt5")
