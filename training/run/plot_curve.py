"""`vanilla-plot-curve CURVE.csv [-o CURVE.png]`: validation loss and BLEU against wall-clock minutes."""

import argparse
import csv
from pathlib import Path

from vanilla_tools.cli import UsageError, console_script, figure_path, pyplot


def plot_curve(csv_path: str | Path, output: str | Path | None = None) -> Path:
    """Draw the learning curve written by vanilla-train (learning_curve.csv) as a PNG; needs matplotlib."""
    plt = pyplot("vanilla-plot-curve")
    csv_path = Path(csv_path)
    beside = csv_path.with_suffix(".png")
    output = figure_path(output or beside, beside.name)
    columns = curve_columns(csv_path)
    minutes = columns["minutes"]
    fig, loss_axis = plt.subplots(figsize=(7, 4))
    loss_axis.plot(minutes, columns["eval_loss"], "o-", color="tab:blue", label="validation loss")
    loss_axis.set_xlabel("wall-clock minutes")
    loss_axis.set_ylabel("validation loss (label-smoothed)", color="tab:blue")
    bleu_axis = loss_axis.twinx()
    bleu_axis.plot(minutes, columns["eval_bleu"], "s-", color="tab:red", label="validation BLEU")
    bleu_axis.set_ylabel("validation sacreBLEU (greedy)", color="tab:red")
    loss_axis.grid(alpha=0.3)
    fig.suptitle(f"learning curve: {csv_path.parent.name}")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


COLUMNS = ("minutes", "eval_loss", "eval_bleu")  # of learning_curve.csv (training/run/curve.py) that the plot draws


def curve_columns(csv_path: Path) -> dict[str, list[float]]:
    """The plotted columns of a learning curve, as numbers; a file that is not one is named, with its first fault."""
    try:
        with open(csv_path, newline="", encoding="utf-8") as f:
            rows = list(csv.DictReader(f))
    except UnicodeDecodeError as error:
        raise UsageError(f"{csv_path} is not a text file ({error})") from None
    if not rows:
        raise UsageError(f"{csv_path} holds no evaluation yet")
    missing = [name for name in COLUMNS if name not in rows[0]]
    if missing:
        raise UsageError(f"{csv_path} is not a learning curve of vanilla-train: no column {', '.join(missing)}")
    try:
        return {name: [float(row[name]) for row in rows] for name in COLUMNS}
    except (TypeError, ValueError) as error:
        raise UsageError(f"{csv_path} holds a value that is not a number ({error})") from None


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("csv", help="learning_curve.csv of a vanilla-train run (or of its --summary_dir)")
    parser.add_argument("-o", "--output", help="PNG to write (default: next to the CSV)")
    return parser


def run(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    print(f"wrote {plot_curve(args.csv, args.output)}")


main = console_script(run)

if __name__ == "__main__":
    main()
