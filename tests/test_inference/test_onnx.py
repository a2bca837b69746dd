"""ONNX: the encoder and the cached decoder step exported with torch.onnx, run by ONNX Runtime with our search,
give the tokens generate() gives (greedy and beam 4, padded batches, n-best lists and their scores), the graphs
agree with the model's forward, the export follows the weights, and what cannot be exported says so."""

import numpy as np
import pytest
import torch
from helpers import copy_task_batch, nbest, saved_model_with_tokenizer, tiny_model
from training_helpers import ENGLISH

from modeling_vanilla import VanillaTransformerForSeq2Seq
from modeling_vanilla.convert_onnx import export_onnx

onnxruntime = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from inference import onnx_runtime  # noqa: E402
from inference.engine import GenerateEngine  # noqa: E402
from inference.onnx_runtime import OnnxEngine, cached_onnx  # noqa: E402
from vanilla_tools.decoding import Decoding  # noqa: E402

pytestmark = pytest.mark.slow

SOURCES = [*ENGLISH, "A dog.", "Two women read a book in the meadow.", "A man plays football. A woman reads."]


@pytest.fixture(scope="module")
def exported(tokenizer, tmp_path_factory):
    folder = saved_model_with_tokenizer(tmp_path_factory.mktemp("onnx"), tokenizer)
    return folder, cached_onnx(folder)


@pytest.mark.parametrize(("num_beams", "nbest"), [(1, None), (4, None), (4, 3), (1, 1), (2, 2)])
def test_onnx_runtime_translates_as_generate(exported, tokenizer, num_beams, nbest):
    folder, onnx_dir = exported
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder).eval()
    decoding = Decoding.resolve(model.generation_config, num_beams=num_beams, nbest=nbest)
    ours, theirs = GenerateEngine(model, tokenizer, decoding), OnnxEngine(onnx_dir, tokenizer, decoding, model.config)
    for batch in (SOURCES, SOURCES[:1], SOURCES[2:5]):
        expected, got = ours(batch), theirs(batch)
        assert got.texts == expected.texts and got.unfinished == expected.unfinished
        assert got.output_lengths == expected.output_lengths and got.source_lengths == expected.source_lengths
        assert [[t for t, _ in n] for n in got.nbest] == [[t for t, _ in n] for n in expected.nbest]
        for mine, other in zip(got.nbest, expected.nbest, strict=True):
            assert [s for _, s in mine] == pytest.approx([s for _, s in other], abs=1e-4)


def test_the_graphs_compute_the_models_forward(exported, tokenizer):
    folder, onnx_dir = exported
    model = VanillaTransformerForSeq2Seq.from_pretrained(folder).eval()
    batch = tokenizer(SOURCES, return_tensors="np", padding=True)
    encoder = onnxruntime.InferenceSession(str(onnx_dir / "encoder.onnx"))
    memory, *cross = encoder.run(None, {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]})
    with torch.no_grad():
        inputs = {key: torch.from_numpy(batch[key]) for key in ("input_ids", "attention_mask")}
        expected = model.get_encoder()(**inputs).last_hidden_state
    np.testing.assert_allclose(memory, expected.numpy(), atol=1e-5)
    assert len(cross) == 2 * model.config.decoder_layers and cross[0].shape[:3] == (len(SOURCES), 4, memory.shape[1])


def test_the_export_follows_the_weights_and_refuses_a_window(exported, tokenizer, tmp_path):
    folder, onnx_dir = exported
    stamp = (onnx_dir / "decoder.onnx").stat().st_mtime_ns
    assert cached_onnx(folder) == onnx_dir and (onnx_dir / "decoder.onnx").stat().st_mtime_ns == stamp
    with pytest.raises(ValueError, match="attention_window"):
        export_onnx(tiny_model(attention_window=2), tmp_path / "windowed")


def test_the_export_command_replaces_a_folder_only_with_force(exported, tmp_path, capsys):
    folder, onnx_dir = exported
    output = tmp_path / "onnx"
    output.mkdir()
    (output / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match=f"{output} exists; pass force=True"):
        onnx_runtime.run([str(folder), str(output)])
    assert (output / "notes.txt").read_text() == "mine"
    onnx_runtime.run([str(folder), str(output), "--force"])
    graphs = ["decoder.onnx", "decoder.onnx.data", "encoder.onnx", "encoder.onnx.data"]
    assert sorted(p.name for p in output.iterdir()) == graphs  # the weights beside each graph
    assert (output / "decoder.onnx.data").read_bytes() == (onnx_dir / "decoder.onnx.data").read_bytes()
    assert capsys.readouterr().out == f"exported {folder} to {output / 'encoder.onnx'} and {output / 'decoder.onnx'}\n"


def until_end(rows: list[list[int]]) -> list[list[int]]:
    return [row[: row.index(2) + 1] if 2 in row else row for row in rows]


@pytest.fixture(scope="module")
def copy_onnx(copy_model, tmp_path_factory):
    """The copy model's graphs, exported once for the searches below (two dynamo exports each time otherwise)."""
    folder = tmp_path_factory.mktemp("copy-onnx")
    export_onnx(copy_model, folder)
    return folder


@pytest.mark.parametrize(("num_beams", "early_stopping"), [(1, True), (4, True), (3, False), (4, "never")])
def test_the_search_ends_as_generate_does(copy_model, copy_onnx, num_beams, early_stopping):
    """On a model whose outputs end (trained to copy), at different lengths in one padded batch: the finished
    hypotheses, their order and the stopping rules of each early_stopping setting are generate()'s."""
    src, mask, _ = copy_task_batch(torch.Generator().manual_seed(11), batch=6)
    decoding = Decoding(num_beams, 0.6, early_stopping, nbest=num_beams)
    found = OnnxEngine(copy_onnx, None, decoding, copy_model.config).search(src.numpy(), mask.numpy())
    out = nbest(
        copy_model, src, mask, num_beams, length_penalty=0.6, early_stopping=early_stopping, max_new_tokens=8 + 50
    )
    assert until_end(found.sequences.tolist()) == until_end(out.sequences.tolist())
    assert len({len(row) for row in until_end(found.sequences.tolist())}) > 1  # ended at different lengths
    if num_beams > 1:
        torch.testing.assert_close(found.scores, out.sequences_scores, rtol=0, atol=1e-4)
