"""`vanilla-attention --model DIR "A sentence."`: heat maps of what the attention looks at.

Attention weights act as a salience map: for each generated target token (one row), how much each source token
(one column) contributed in encoder-decoder attention; and for each source token, which source tokens it read in
encoder self-attention. The translation is generated first (beam search), then one teacher-forced pass with eager
attention returns every layer's and head's weights. Needs matplotlib (``pip install "vanilla-transformer[plot]"``).

``--html FILE`` writes bertviz's interactive view instead (``--view head`` or ``model``: its ``head_view`` /
``model_view`` in encoder-decoder mode, every layer and head of the encoder, decoder and encoder-decoder attention;
``pip install bertviz``).
"""

import argparse
from dataclasses import dataclass
from pathlib import Path

import torch

from vanilla_tools.cli import UsageError, console_script, figure_path, load_model, load_tokenizer, positive_int, require
from vanilla_tools.decoding import PAPER_NUM_BEAMS
from vanilla_tools.text_form import served_text_form


@dataclass
class AttentionMaps:
    sentence: str
    source_tokens: list[str]
    target_tokens: list[str]
    translation: str
    cross: torch.Tensor  # (layers, heads, target, source)
    encoder: torch.Tensor  # (layers, heads, source, source)
    decoder: torch.Tensor  # (layers, heads, target, target)
    decoder_input_tokens: list[str]  # what the decoder read at each target position: start token, then target[:-1]


def attention_maps(model, tokenizer, sentence: str, num_beams: int = PAPER_NUM_BEAMS) -> AttentionMaps:
    """Translate ``sentence`` and return its cross- and encoder self-attention weights, every layer and head."""
    batch = tokenizer([sentence], return_tensors="pt").to(model.device)
    model.eval()
    with torch.no_grad():
        generated = model.generate(**batch, num_beams=num_beams)  # (1, 1 + T): decoder start, tokens, </s>
        previous = model.config._attn_implementation
        model.set_attn_implementation("eager")  # the only implementation that returns weights
        try:
            out = model(**batch, decoder_input_ids=generated[:, :-1], output_attentions=True)
        finally:
            model.set_attn_implementation(previous)
    target_ids = generated[0, 1:].tolist()  # what each decoder position produced
    return AttentionMaps(
        sentence=sentence,
        source_tokens=tokenizer.convert_ids_to_tokens(batch["input_ids"][0].tolist()),
        target_tokens=tokenizer.convert_ids_to_tokens(target_ids),
        translation=tokenizer.decode(target_ids, skip_special_tokens=True).strip(),
        # in float32 on the CPU, whatever the model runs in (vanilla-demo --device, --dtype): figures read them there
        cross=torch.stack(out.cross_attentions)[:, 0].float().cpu(),
        encoder=torch.stack(out.encoder_attentions)[:, 0].float().cpu(),
        decoder=torch.stack(out.decoder_attentions)[:, 0].float().cpu(),
        decoder_input_tokens=tokenizer.convert_ids_to_tokens(generated[0, :-1].tolist()),
    )


def bertviz_html(maps: AttentionMaps, view: str = "head") -> str:
    """bertviz's ``head_view`` or ``model_view`` of every layer and head, in its encoder-decoder mode (the decoder
    labelled by its inputs, as bertviz's own encoder-decoder example does), as a standalone HTML page."""
    bertviz = require("bertviz", "ecosystem", "--html")

    def per_layer(weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(layer[None] for layer in weights)  # (layers, heads, q, k) -> layers x (1, heads, q, k)

    show = {"head": bertviz.head_view, "model": bertviz.model_view}[view]
    html = show(
        encoder_attention=per_layer(maps.encoder),
        decoder_attention=per_layer(maps.decoder),
        cross_attention=per_layer(maps.cross),
        encoder_tokens=maps.source_tokens,
        decoder_tokens=maps.decoder_input_tokens,
        html_action="return",
    )
    return "<html><head><meta charset='utf-8'></head><body>" + html.data + "</body></html>"


def attention_figure(maps: AttentionMaps, layer: int | None = None, head: int | None = None):
    """A matplotlib Figure: cross-attention (target rows x source columns) beside encoder self-attention (source x
    source). ``layer``/``head`` pick one map; None averages over layers and/or heads. Made without pyplot, so a
    long-running page that draws many does not accumulate them."""
    from matplotlib.figure import Figure

    def select(weights: torch.Tensor) -> torch.Tensor:
        weights = weights[layer : layer + 1] if layer is not None else weights
        weights = weights[:, head : head + 1] if head is not None else weights
        return weights.mean(dim=(0, 1))

    where = f"layer {layer if layer is not None else 'mean'}, head {head if head is not None else 'mean'}"
    source = [t.replace("\u2581", "_") for t in maps.source_tokens]
    target = [t.replace("\u2581", "_") for t in maps.target_tokens]
    fig = Figure(figsize=(4 + 0.45 * 2 * len(source), 2.5 + 0.35 * max(len(target), len(source))))
    axes = fig.subplots(1, 2)
    for ax, weights, rows, title in (
        (axes[0], select(maps.cross), target, f"encoder-decoder attention ({where})"),
        (axes[1], select(maps.encoder), source, f"encoder self-attention ({where})"),
    ):
        image = ax.imshow(weights.numpy(), cmap="viridis", vmin=0.0, aspect="auto")
        ax.set_xticks(range(len(source)), source, rotation=60, ha="right", fontsize=8)
        ax.set_yticks(range(len(rows)), rows, fontsize=8)
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    fig.suptitle(
        f"{' '.join(maps.source_tokens).replace(chr(0x2581), '')[:80]}  ->  {maps.translation[:80]}", fontsize=9
    )
    fig.tight_layout()
    return fig


def plot_attention(maps: AttentionMaps, path: str | Path, layer: int | None = None, head: int | None = None) -> Path:
    """``attention_figure`` as a PNG file."""
    path = Path(path)
    attention_figure(maps, layer, head).savefig(path, dpi=110)
    return path


def check_layer_and_head(config, layer: int | None, head: int | None) -> None:
    """Refuse a --layer or --head (0-based) the model does not have, naming the flag."""
    for name, value, limit in (
        ("layer", layer, min(config.encoder_layers, config.decoder_layers)),
        ("head", head, config.num_attention_heads),
    ):
        if value is not None and not 0 <= value < limit:
            raise UsageError(f"--{name} {value} is out of range: the model has {limit}")


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sentence", help="source sentence to translate and show")
    parser.add_argument("--model", required=True, help="model directory (or Hub id) with its tokenizer")
    parser.add_argument("--output", default="attention.png", help="PNG file to write")
    parser.add_argument("--layer", type=int, default=None, help="one layer (0-based); default: mean over layers")
    parser.add_argument("--head", type=int, default=None, help="one head (0-based); default: mean over heads")
    parser.add_argument("--num_beams", type=positive_int, default=PAPER_NUM_BEAMS)
    parser.add_argument("--html", help="write bertviz's interactive view to this HTML file instead of a PNG")
    parser.add_argument("--view", choices=("head", "model"), default="head", help="bertviz's head_view or model_view")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    out = Path(args.html) if args.html else figure_path(args.output, "attention.png")
    if args.html:  # before the model is loaded and translates
        require("bertviz", "ecosystem", "--html")
    model = load_model(args.model)
    tokenizer = load_tokenizer(args.model)
    check_layer_and_head(model.config, args.layer, args.head)
    maps = attention_maps(model, tokenizer, served_text_form(model).source(args.sentence), args.num_beams)
    if args.html:
        out.write_text(bertviz_html(maps, args.view), encoding="utf-8")
    else:
        plot_attention(maps, out, args.layer, args.head)
    print(f"{args.sentence} -> {maps.translation}\nwrote {out}")


main = console_script(run)

if __name__ == "__main__":
    main()
