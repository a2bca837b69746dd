"""transformers' own common model tests (``ModelTesterMixin``, ``ConfigTester``) against our two model classes, with
a tester modelled on Marian's (``tests/models/marian/test_modeling_marian.py`` of transformers).

The test files come from the source release of the installed transformers (``transformers_release_tests``); if the
registry cannot be reached this module is skipped with that reason. Tests not run, and why, are in ``NOT_RUN``.
"""

import tempfile
import unittest

import pytest
import torch
from transformers.models.auto.modeling_auto import MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

from modeling_vanilla import VanillaTransformerConfig, VanillaTransformerForSeq2Seq, VanillaTransformerModel
from modeling_vanilla.modeling_vanilla import VanillaTransformerDecoder, VanillaTransformerEncoder

try:
    from transformers_release_tests import import_release_tests

    ModelTesterMixin, ConfigTester, ids_tensor = import_release_tests()
except RuntimeError as error:
    pytest.skip(f"transformers' release tests are not available: {error}", allow_module_level=True)

# Every test of ModelTesterMixin runs: 177 on transformers 5.25 (175 on 5.24), 163 on 5.17 (the oldest release tested).
# On this CPU machine 65 (5.25; 63 on 5.24) and 59 (5.17) of them are skipped: the two below on purpose, the others with
# transformers' own reason: they need an accelerator (offloading, device context managers, flex-attention gradients,
# SDPA compile and flash dispatch; model parallelism needs several, one test MPS), flash-attention 2, 3 or 4, deepspeed,
# or the kernels library; or they test what this model does not have: RoPE, a tensor-parallel plan, a weight-renaming
# map, modules kept in fp32, grouped_mm experts, MoE routing, composite sub-models, resizable position embeddings
# (sinusoids need none), a decoder-only LM head, or a single `hidden_states` output (an encoder-decoder returns encoder_
# and decoder_hidden_states).
NOT_RUN = {
    "test_generation_tester_mixin_inheritance": "GenerationTesterMixin is not in the transformers sdist "
    "(tests/generation/ is missing), so there is nothing real to inherit; generate() is covered by "
    "tests/test_modeling_vanilla/test_generation.py and the generation cases of tests/test_bad_inputs.py",
    "test_torch_compile_for_training": "compiles a whole training step with inductor: minutes on a 2-core CPU; "
    "tests/test_modeling_vanilla/test_model.py::test_compiled_forward_and_backward_equal_eager checks the same graph "
    "(aot_eager)",
}


class VanillaTransformerModelTester:
    """Tiny config and inputs, as ``MarianModelTester`` builds them (pad 1, eos 2, decoder start 3)."""

    def __init__(
        self,
        parent,
        batch_size=13,
        seq_length=7,
        vocab_size=99,
        hidden_size=16,
        num_layers=2,
        num_heads=4,
        ffn_dim=4,
        dropout=0.1,
    ):
        self.parent = parent
        self.batch_size, self.seq_length, self.vocab_size = batch_size, seq_length, vocab_size
        self.hidden_size, self.num_hidden_layers, self.num_attention_heads = hidden_size, num_layers, num_heads
        self.ffn_dim, self.dropout = ffn_dim, dropout
        self.is_training = True
        self.pad_token_id, self.eos_token_id, self.decoder_start_token_id = 1, 2, 3

    def get_config(self) -> VanillaTransformerConfig:
        return VanillaTransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers,
            num_attention_heads=self.num_attention_heads,
            ffn_dim=self.ffn_dim,
            dropout=self.dropout,
            attention_dropout=self.dropout,
            max_position_embeddings=100,
            pad_token_id=self.pad_token_id,
            eos_token_id=self.eos_token_id,
            decoder_start_token_id=self.decoder_start_token_id,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        input_ids[:, -1] = self.eos_token_id
        decoder_input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        attention_mask = input_ids.ne(self.pad_token_id)
        inputs = {
            "input_ids": input_ids,
            "decoder_input_ids": decoder_input_ids,
            "attention_mask": attention_mask,
            "decoder_attention_mask": decoder_input_ids.ne(self.pad_token_id),
        }
        return self.get_config(), inputs

    def prepare_config_and_inputs_for_common(self):
        return self.prepare_config_and_inputs()


class VanillaTransformerModelTest(ModelTesterMixin, unittest.TestCase):
    all_model_classes = (VanillaTransformerModel, VanillaTransformerForSeq2Seq)
    is_encoder_decoder = True
    test_can_init_all_missing_weights_before_2023 = True  # the mixin dates models by a copyright line; ours has none

    @classmethod
    def setUpClass(cls):
        # The mixin picks each class's inputs and checks by its entry in transformers' name tables (modeling_auto),
        # where an in-tree model is listed; ours is entered for the duration of the tests, as Marian is there.
        cls.name_tables = [
            (MODEL_MAPPING_NAMES, "VanillaTransformerModel"),
            (MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES, "VanillaTransformerForSeq2Seq"),
        ]
        for table, name in cls.name_tables:
            table[VanillaTransformerConfig.model_type] = name

    @classmethod
    def tearDownClass(cls):
        for table, _ in cls.name_tables:
            del table[VanillaTransformerConfig.model_type]

    def setUp(self):
        self.model_tester = VanillaTransformerModelTester(self)
        self.config_tester = ConfigTester(self, config_class=VanillaTransformerConfig, d_model=48)

    def test_config(self):
        # run_common_tests() minus check_config_arguments_init, whose kwargs table lives in a module the sdist lacks
        tester = self.config_tester
        tester.create_and_test_config_common_properties()
        tester.create_and_test_config_to_json_string()
        tester.create_and_test_config_to_json_file()
        tester.create_and_test_config_from_and_save_pretrained()
        tester.create_and_test_config_from_and_save_pretrained_subfolder()
        tester.create_and_test_config_from_pretrained_custom_kwargs()
        tester.create_and_test_config_with_num_labels()
        tester.check_config_can_be_init_without_params()

    def test_save_load_strict(self):
        config, _ = self.model_tester.prepare_config_and_inputs()
        for model_class in self.all_model_classes:
            with tempfile.TemporaryDirectory() as folder:
                model_class(config).save_pretrained(folder)
                _, info = model_class.from_pretrained(folder, output_loading_info=True)
            self.assertEqual(info["missing_keys"], set())

    def test_encoder_and_decoder_standalone(self):
        """As Marian's test: the stacks saved and loaded on their own give the full model's hidden states."""
        config, inputs = self.model_tester.prepare_config_and_inputs()
        model = VanillaTransformerModel(config).eval()
        outputs = model(**inputs)
        with tempfile.TemporaryDirectory() as folder:
            model.get_encoder().save_pretrained(folder)
            encoder = VanillaTransformerEncoder.from_pretrained(folder).eval()
        encoded = encoder(inputs["input_ids"], attention_mask=inputs["attention_mask"]).last_hidden_state
        torch.testing.assert_close(encoded, outputs.encoder_last_hidden_state)
        with tempfile.TemporaryDirectory() as folder:
            model.get_decoder().save_pretrained(folder)
            decoder = VanillaTransformerDecoder.from_pretrained(folder).eval()
        decoded = decoder(
            input_ids=inputs["decoder_input_ids"],
            attention_mask=inputs["decoder_attention_mask"],
            encoder_hidden_states=encoded,
            encoder_attention_mask=inputs["attention_mask"],
        ).last_hidden_state
        torch.testing.assert_close(decoded, outputs.last_hidden_state)


for _name, _reason in NOT_RUN.items():
    setattr(VanillaTransformerModelTest, _name, unittest.skip(_reason)(lambda self: None))
