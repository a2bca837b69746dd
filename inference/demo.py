"""`vanilla-demo --model DIR`: a web page to translate with the model and see where it looks.

Type or paste a sentence and press Translate (or Enter): the translation, from the engine ``vanilla-translate``
chooses (CTranslate2 where it can run the model, else ``generate()``); the n-best list of the beam with the scores
it ranked them by; and the encoder-decoder attention of any layer and head (or their mean) as a heat map, target
tokens down and source tokens across, beside the encoder's self-attention. Built with Gradio
(``pip install "vanilla-transformer[ecosystem]"``); as a Hugging Face Space: docs/ecosystem.md#a-demo-page.
"""

import argparse
import logging

from vanilla_tools.cli import console_script, positive_int, require
from vanilla_tools.decoding import Decoding
from vanilla_tools.device import add_device_arguments
from vanilla_tools.text_form import output_text

from .attention import AttentionMaps, attention_figure, attention_maps, check_layer_and_head
from .engines import ENGINES, EngineOptions, build_engine, load

logger = logging.getLogger(__name__)
MEAN = "mean"


def build_demo(
    model_dir: str,
    engine: str = "auto",
    nbest: int = 4,
    trust_remote_code: bool = False,
    device: str = "auto",
    dtype: str | None = None,
    detokenize: bool = False,
):
    """The page (a ``gradio.Blocks``) for the model in ``model_dir``: its engine built once on ``device`` (a
    ``--device`` value) in ``dtype`` (``--dtype``, as vanilla-translate's), an n-best list of ``nbest`` (at most the
    model's beams). A sentence is prepared in the model's text form first; ``detokenize`` shows a Moses-tokenized
    model's translations detokenized."""
    gr = require("gradio", "ecosystem", "vanilla-demo")

    options = EngineOptions(engine, device, dtype, trust_remote_code=trust_remote_code)
    loaded = load(model_dir, options)
    model, tokenizer, form = loaded.model, loaded.tokenizer, loaded.form
    shown = output_text(form, detokenize)
    beams = Decoding.resolve(model.generation_config).num_beams
    if nbest > beams:  # (the default, 4, on a model that searches fewer beams)
        logger.info("--nbest %d: the model searches %d beam(s), so the page shows %d", nbest, beams, beams)
    decoding = Decoding.resolve(model.generation_config, nbest=min(nbest, beams))
    translate = build_engine(loaded, decoding, options)
    config = model.config
    layers = [MEAN, *map(str, range(min(config.encoder_layers, config.decoder_layers)))]
    heads = [MEAN, *map(str, range(config.num_attention_heads))]

    def figure(maps: AttentionMaps | None, layer: str, head: str):
        if maps is None:
            return None
        chosen = [None if value == MEAN else int(value) for value in (layer, head)]
        check_layer_and_head(config, *chosen)
        return attention_figure(maps, *chosen)

    def on_translate(text: str, layer: str, head: str):
        sentence = " ".join(text.split())
        if not sentence:
            raise gr.Error("Type a sentence to translate.")
        result = translate([sentence])
        maps = attention_maps(model, tokenizer, form.source(sentence), decoding.num_beams)
        rows = [[shown(candidate), round(score, 4)] for candidate, score in result.nbest[0]]
        return shown(result.texts[0]), rows, maps, figure(maps, layer, head)

    engine_name = type(getattr(translate, "engine", translate)).__name__  # beneath PreparedEngine, if it is one
    search = f"beam {decoding.num_beams}, alpha {decoding.length_penalty}"
    with gr.Blocks(title="The Transformer: translate and see its attention") as demo:
        gr.Markdown(f"## The Transformer (Vaswani et al., 2017)\n`{model_dir}`: {search}, {engine_name}")
        source = gr.Textbox(label="Source", lines=2, placeholder="A dog runs through the snow.", elem_id="source")
        button = gr.Button("Translate", variant="primary", elem_id="translate")
        translation = gr.Textbox(label="Translation", interactive=False, elem_id="translation")
        candidates = gr.Dataframe(
            headers=["translation", "score"],
            label=f"the {decoding.nbest} best of the beam",
            interactive=False,
            elem_id="nbest",
        )
        with gr.Row():
            layer = gr.Dropdown(layers, value=MEAN, label="layer", elem_id="layer")
            head = gr.Dropdown(heads, value=MEAN, label="head", elem_id="head")
        heat_map = gr.Plot(label="attention", elem_id="heatmap")
        maps = gr.State(None)
        for event in (button.click, source.submit):
            event(on_translate, [source, layer, head], [translation, candidates, maps, heat_map])
        for selector in (layer, head):
            selector.change(figure, [maps, layer, head], heat_map)
    return demo


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vanilla-demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", required=True, help="model directory (or Hub id) with its tokenizer")
    parser.add_argument("--engine", choices=ENGINES, default="auto", help="as vanilla-translate's")
    parser.add_argument("--nbest", type=positive_int, default=4, help="candidates shown (at most the beams)")
    parser.add_argument("--host", default="127.0.0.1", help="0.0.0.0 to serve other machines")
    parser.add_argument("--port", type=int, default=7860)
    parser.add_argument("--detokenize", action="store_true", help="as vanilla-translate's")
    parser.add_argument("--trust_remote_code", action="store_true")
    add_device_arguments(parser)
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s", level=logging.INFO)
    demo = build_demo(
        args.model, args.engine, args.nbest, args.trust_remote_code, args.device, args.dtype, args.detokenize
    )
    demo.launch(server_name=args.host, server_port=args.port, share=False)


main = console_script(run)

if __name__ == "__main__":
    main()
