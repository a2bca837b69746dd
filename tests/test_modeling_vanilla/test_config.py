import pytest

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq


def n_params(config: VanillaTransformerConfig) -> int:
    return sum(p.numel() for p in VanillaTransformerForSeq2Seq(config).parameters())


def test_defaults_are_the_papers_base_model():
    c = VanillaTransformerConfig()
    assert (c.d_model, c.ffn_dim, c.num_attention_heads, c.encoder_layers, c.decoder_layers) == (512, 2048, 8, 6, 6)
    assert (c.dropout, c.activation_function, c.position_embedding_type, c.sinusoidal_layout) == (
        0.1,
        "relu",
        "sinusoidal",
        "interleaved",
    )
    assert c.scale_embedding and c.share_encoder_decoder_embeddings and c.tie_word_embeddings
    assert c.label_smoothing == 0.0 and c.is_encoder_decoder
    assert c.hidden_size == 512 and c.num_hidden_layers == 6  # transformers' standard names


def test_base_parameter_count_matches_table_3():
    count = n_params(VanillaTransformerConfig.base(vocab_size=37000))
    assert count == 63_082_496  # shared 37000x512 embedding + 6 encoder + 6 decoder layers
    assert abs(count - 65e6) / 65e6 < 0.03


def test_big_parameter_count_matches_table_3():
    config = VanillaTransformerConfig.big(vocab_size=37000)
    assert (config.d_model, config.ffn_dim, config.num_attention_heads, config.dropout) == (1024, 4096, 16, 0.3)
    count = n_params(config)
    assert count == 214_245_376
    assert abs(count - 213e6) / 213e6 < 0.03


def test_presets_take_overrides():
    assert VanillaTransformerConfig.big(dropout=0.1, encoder_layers=2).dropout == 0.1
    assert VanillaTransformerConfig.base(d_model=256, num_attention_heads=4).d_model == 256


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"d_model": 500, "num_attention_heads": 8}, "d_model"),
        ({"d_model": 0}, "d_model"),
        ({"vocab_size": -5}, "vocab_size"),
        ({"encoder_layers": 0}, "encoder_layers"),
        ({"decoder_layers": 0}, "decoder_layers"),
        ({"ffn_dim": 0}, "ffn_dim"),
        ({"num_attention_heads": 0}, "num_attention_heads"),
        ({"max_position_embeddings": 0}, "max_position_embeddings"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"attention_dropout": 1.5}, "attention_dropout"),
        ({"activation_dropout": 1.0}, "activation_dropout"),
        ({"label_smoothing": 1.0}, "label_smoothing"),
        ({"activation_function": "not_an_activation"}, "activation_function"),
        ({"sinusoidal_layout": "zigzag"}, "sinusoidal_layout"),
        ({"position_embedding_type": "rotary"}, "position_embedding_type"),
        ({"layer_norm_eps": 0.0}, "layer_norm_eps"),
        ({"pad_token_id": 37000}, "pad_token_id"),
        ({"text_form": "lowercased"}, "text_form"),
        ({"text_form": {"lowercase": True}}, "text_form"),
    ],
)
def test_invalid_values_raise_value_error_naming_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        VanillaTransformerConfig(**overrides)


def test_config_round_trips_through_json(tmp_path):
    config = VanillaTransformerConfig(
        d_model=64, num_attention_heads=4, sinusoidal_layout="concat", label_smoothing=0.1
    )
    config.save_pretrained(tmp_path)
    loaded = VanillaTransformerConfig.from_pretrained(tmp_path)
    assert loaded.to_dict() == config.to_dict()
    assert loaded.model_type == "vanilla_transformer"


def test_the_text_form_is_raw_unless_a_saved_config_lacks_it(tmp_path):
    """A config made in code reads raw text; one saved with the steps keeps them; a config.json saved before the
    field existed loads as unknown (None), which the package's entry points say in one line."""
    assert VanillaTransformerConfig().text_form == "raw" and VanillaTransformerConfig().text_form_note() is None
    steps = {
        "lowercase": True,
        "moses_normalize_punctuation": True,
        "moses_tokenize": True,
        "moses_escape": False,
        "source_lang": "en",
        "target_lang": "de",
    }
    VanillaTransformerConfig(text_form=steps).save_pretrained(tmp_path)
    loaded = VanillaTransformerConfig.from_pretrained(tmp_path)
    assert loaded.text_form == steps and "(en -> de, escape=False: config.text_form)" in loaded.text_form_note()
    old = {key: value for key, value in VanillaTransformerConfig().to_dict().items() if key != "text_form"}
    assert VanillaTransformerConfig.from_dict(old).text_form is None
    assert VanillaTransformerConfig.from_dict(old).text_form_note() is None
