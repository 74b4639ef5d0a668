"""Learn a substitution matrix through a differentiable alignment (ta.soft_align).

Homologous pairs: proteins of the bundled proteome, each against a copy evolved from it
(residues substituted with probabilities exp(lambda * BLOSUM62) and a few insertions and
deletions); negatives: the same copies paired with another protein. A symmetric 20 x 20
matrix W starts at zero and is trained so that soft local alignment scores separate the
two (a logistic loss on score differences). The loss falls and W's correlation with
BLOSUM62 rises, although the model never sees BLOSUM62 itself, only sequences it shaped.

    python examples/soft_align_train.py [--device cuda] [--steps 300]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

import torchalign as ta
from torchalign.io import iter_records

AA = "ARNDCQEGHILKMFPSTWYV"  # the first 20 codes of ta.PROTEIN (BLOSUM order)
DATA = Path(ta.__file__).parent / "data" / "proteome_HG003687.fa"


def proteins(length: int) -> list[str]:
    seqs = [seq for _, seq in iter_records(DATA)]
    return [s[:length] for s in seqs if len(s) >= length and set(s[:length]) <= set(AA)]


def evolve(codes: torch.Tensor, blosum: torch.Tensor, g: torch.Generator, indel: float = 0.05) -> torch.Tensor:
    """A homolog: each residue substituted from exp(ln2 / 2 * BLOSUM62[a, :]) (its
    half-bit scores as log-odds), plus insertions and deletions."""
    p = torch.softmax(blosum[codes] * (0.5 * 0.6931), dim=1)
    out = torch.multinomial(p, 1, generator=g)[:, 0]
    keep = torch.rand(len(out), generator=g) > indel
    out = out[keep]
    ins = torch.randint(0, 20, (int((torch.rand(len(out), generator=g) < indel).sum()),), generator=g)
    at = torch.randint(0, len(out) + 1, (len(ins),), generator=g)
    for a, x in sorted(zip(at.tolist(), ins.tolist()), reverse=True):
        out = torch.cat([out[:a], torch.tensor([x]), out[a:]])
    return out


def padded(seqs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    lens = torch.tensor([len(s) for s in seqs])
    out = torch.zeros(len(seqs), int(lens.max()), dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = s
    return out, lens


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--length", type=int, default=40)
    args = ap.parse_args()
    dev = torch.device(args.device)
    g = torch.Generator().manual_seed(0)
    blosum = ta.Scoring().table[:20, :20].float()
    prots = [torch.tensor([AA.index(c) for c in p]) for p in proteins(args.length)]
    homologs = [evolve(p, blosum, g) for p in prots]
    A = torch.zeros(20, 20, device=dev, requires_grad=True)
    opt = torch.optim.Adam([A], lr=0.05)
    start, first, recent = time.perf_counter(), None, []
    for step in range(args.steps + 1):
        pick = torch.randint(0, len(prots), (args.batch,), generator=g)
        other = (pick + torch.randint(1, len(prots), (args.batch,), generator=g)) % len(prots)
        q, q_len = padded([prots[i] for i in pick])
        t, t_len = padded([homologs[i] for i in pick])
        n, n_len = padded([prots[i] for i in other])
        W = (A + A.T) / 2
        scores = W[q.to(dev)[:, :, None], t.to(dev)[:, None, :]]  # [B, N, M]: learned scores of each pair
        negatives = W[n.to(dev)[:, :, None], t.to(dev)[:, None, :]]
        kw = dict(gap_open=3.0, gap_extend=0.5, mode="local")
        pos = ta.soft_align(scores, **kw, lengths=(q_len.to(dev), t_len.to(dev)))
        neg = ta.soft_align(negatives, **kw, lengths=(n_len.to(dev), t_len.to(dev)))
        loss = torch.nn.functional.softplus(neg - pos + 5.0).mean()  # homologs must win by a margin
        opt.zero_grad()
        loss.backward()
        opt.step()
        recent.append(loss.item())
        if step % 50 == 0:
            w = W.detach().cpu().flatten()
            r = torch.corrcoef(torch.stack([w, blosum.flatten()]))[0, 1].item() if w.std() > 0 else 0.0
            mean, recent = sum(recent) / len(recent), []  # the loss averaged since the last line
            first = mean if first is None else first
            print(f"step {step:4d}  loss {mean:.4f}  corr(W, BLOSUM62) {r:+.3f}  "
                  f"{time.perf_counter() - start:.1f} s", flush=True)
    print(f"loss {first:.4f} -> {mean:.4f}; final correlation with BLOSUM62 {r:+.3f}")


if __name__ == "__main__":
    main()
