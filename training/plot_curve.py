"""`vanilla-plot-curve CURVE.csv [-o CURVE.png]`: validation loss and BLEU against wall-clock minutes."""

import argparse
import csv
from pathlib import Path

from vanilla_tools.cli import UsageError, console_script


def plot_curve(csv_path: str | Path, output: str | Path | None = None) -> Path:
    """Draw the learning curve written by vanilla-train (learning_curve.csv) as a PNG; needs matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    csv_path = Path(csv_path)
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise UsageError(f"{csv_path} holds no evaluation yet")
    minutes = [float(r["minutes"]) for r in rows]
    fig, loss_axis = plt.subplots(figsize=(7, 4))
    loss_axis.plot(minutes, [float(r["eval_loss"]) for r in rows], "o-", color="tab:blue", label="validation loss")
    loss_axis.set_xlabel("wall-clock minutes")
    loss_axis.set_ylabel("validation loss (label-smoothed)", color="tab:blue")
    bleu_axis = loss_axis.twinx()
    bleu_axis.plot(minutes, [float(r["eval_bleu"]) for r in rows], "s-", color="tab:red", label="validation BLEU")
    bleu_axis.set_ylabel("validation sacreBLEU (greedy)", color="tab:red")
    loss_axis.grid(alpha=0.3)
    fig.suptitle(f"learning curve: {csv_path.parent.name}")
    fig.tight_layout()
    output = Path(output) if output else csv_path.with_suffix(".png")
    fig.savefig(output, dpi=110)
    plt.close(fig)
    return output


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
