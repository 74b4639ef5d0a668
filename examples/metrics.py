"""Error rates of a recogniser's transcripts with torchalign.metrics: CER, WER, MER and
edit distances, batch by batch (as in an evaluation loop), on the GPU when there is one.

    pip install -e ".[metrics]"          # torchmetrics, for the Metric classes
    python examples/metrics.py [--device cuda|cpu]

The Metric classes are torchmetrics Metrics (update / compute / reset, DDP-ready); the
functions (char_error_rate, ...) need only torch. Both give torchmetrics' numbers.
"""

import argparse

import torch

import torchalign.metrics as tam

REFERENCES = [
    "the quick brown fox jumps over the lazy dog",
    "she sells sea shells by the sea shore",
    "a journey of a thousand miles begins with a single step",
    "naïve café owners serve crème brûlée",
    "",
    "to be or not to be that is the question",
]
TRANSCRIPTS = [
    "the quick brown fox jumped over a lazy dog",
    "she sells seashells by the seashore",
    "a journey of thousand miles begins with single step",
    "naive cafe owners serve creme brulee",
    "uh",
    "to be or not to be that is the question",
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(ap.parse_args().device)

    metrics = {"CER": tam.CharErrorRate(), "WER": tam.WordErrorRate(), "MER": tam.MatchErrorRate(),
               "edits per line": tam.EditDistance(reduction="mean")}
    metrics = {name: m.to(device) for name, m in metrics.items()}
    for i in range(0, len(REFERENCES), 2):  # batches of two lines, as a DataLoader would give them
        preds, target = TRANSCRIPTS[i : i + 2], REFERENCES[i : i + 2]
        for m in metrics.values():
            m.update(preds, target)
    results = {name: m.compute() for name, m in metrics.items()}
    for name, value in results.items():
        print(f"{name}: {value.item():.4f} (on {value.device})")

    # the functions: one call over everything, the same numbers
    wer = tam.word_error_rate(TRANSCRIPTS, REFERENCES, device=device)
    per_line = tam.edit_distance(TRANSCRIPTS, REFERENCES, reduction="none", device=device)
    print(f"word_error_rate: {wer.item():.4f}; character edits per line: {per_line.tolist()}")

    try:  # the same numbers as torchmetrics' own implementation
        from torchmetrics.functional.text import char_error_rate, word_error_rate

        same = (torch.equal(results["CER"].cpu(), char_error_rate(TRANSCRIPTS, REFERENCES))
                and torch.equal(wer.cpu(), word_error_rate(TRANSCRIPTS, REFERENCES)))
        print(f"matches torchmetrics: {same}")
    except ImportError:
        pass


if __name__ == "__main__":
    main()
