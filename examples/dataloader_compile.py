"""A DataLoader feeds reads to a compiled function that searches them for guides.

Workers encode strings into CPU SequenceBatches; the loader pins them in the main process
(pin_memory=True calls SequenceBatch.pin_memory), which moves each batch to the device and
runs a torch.compile(fullgraph=True) function
that calls the ops. Workers never touch CUDA here; if yours must, pass
multiprocessing_context="spawn" to the DataLoader (a forked worker cannot initialise CUDA).

    python examples/dataloader_compile.py [--device cuda|cpu]
"""

import argparse
import random

import torch
from torch.utils.data import DataLoader

import torchalign as ta


class RandomReads(torch.utils.data.Dataset):
    def __init__(self, n: int, guide: str, seed: int = 0):
        rng = random.Random(seed)
        self.reads = []
        for _ in range(n):
            read = [rng.choice("ACGT") for _ in range(rng.randint(80, 150))]
            if rng.random() < 0.3:  # plant the guide with one substitution
                i = rng.randrange(len(read) - len(guide))
                read[i : i + len(guide)] = guide
                read[i + 3] = "A" if read[i + 3] != "A" else "C"
            self.reads.append("".join(read))

    def __len__(self):
        return len(self.reads)

    def __getitem__(self, i):
        return self.reads[i]


def collate(reads: list[str]) -> ta.SequenceBatch:
    return ta.encode(reads, alphabet="dna")  # runs in the worker, on the CPU: no CUDA there


@torch.compile(fullgraph=True)
def score(reads: ta.SequenceBatch, guides: ta.SequenceBatch, k: int):
    profile = ta.hamming_profile(reads, guides, check=False)  # [guides, residues], fixed shape
    best = torch.where(profile >= 0, profile, 1 << 30).amin(1)
    hits = ta.kmismatch_search(reads, guides, k, both_strands=True)
    return best, hits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = ap.parse_args()
    guide = "GACGCATAAAGATGAGACGCTGG"
    loader = DataLoader(RandomReads(512, guide), batch_size=128, num_workers=2, collate_fn=collate,
                        pin_memory=args.device == "cuda")
    guides = ta.encode([guide], alphabet="dna", device=args.device)
    total = 0
    for batch in loader:
        batch = batch.to(args.device, non_blocking=True)
        best, hits = score(batch, guides, 2)
        total += hits.pattern.numel()
        print(f"{len(batch)} reads: best distance {best.tolist()}, {hits.pattern.numel()} hits")
    print(f"{total} hits in {len(loader.dataset)} reads")


if __name__ == "__main__":
    main()
