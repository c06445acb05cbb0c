//! A BERT sentence encoder (all-MiniLM-L6-v2 and models of its shape) on the CPU.
//!
//! The weights come from a safetensors file whose matrices are int8 with one f32 scale per row
//! (`name` and `name.scale`; `scripts/pack-encoder.py` writes it) and whose metadata holds the
//! shape (`num_hidden_layers`, `num_attention_heads`, `hidden_size`, `intermediate_size`,
//! `layer_norm_eps`). The matrices stay int8 in memory (a quarter of f32's reads: a short text's
//! products are bound by reading the weights); the dense layers' products widen a strip of
//! weights at a time into cache and run the fastest kernel the CPU has (AVX-512 BF16, AVX-512,
//! AVX2, or plain loops), chosen at load. Attention's small products go through
//! `matrixmultiply`; the rest (layer norm, softmax, GELU, mean pooling) is a few loops.
//!
//! Each layer is held in two halves whose sums add up to the layer's output: half the heads
//! with the rows of the attention projection that read them, and half the feed-forward
//! columns with the rows of the output projection that read them. [`Encoder::encode`] runs
//! them one after the other; [`Encoder::encode_on_two_threads`] lets a helper thread take
//! one of each pair, for the same vector bit for bit in about two thirds of the time.
//!
//! This crate is built with optimisations even in debug builds (see the workspace's
//! `Cargo.toml`): an unoptimised forward pass is a hundred times slower.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use safetensors::{Dtype, SafeTensors};

/// Why a weights file could not be loaded.
#[derive(Debug)]
pub struct LoadError(String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

fn err(message: impl Into<String>) -> LoadError {
    LoadError(message.into())
}

/// A dense layer: `y = x · Wᵀ + b`, with `Wᵀ` kept as `in × out`, row-major (so the product
/// reads the weights in order).
struct Linear {
    /// `in × out` int8; column `c` is scaled by `scales[c]`.
    weight: Vec<i8>,
    scales: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

impl Linear {
    /// The layer's outputs `from..to` alone.
    fn columns(&self, from: usize, to: usize) -> Linear {
        let (k, m) = (self.inputs, self.outputs);
        let mut weight = Vec::with_capacity(k * (to - from));
        for row in self.weight.chunks_exact(m) {
            weight.extend_from_slice(&row[from..to]);
        }
        Linear {
            weight,
            scales: self.scales[from..to].to_vec(),
            bias: self.bias[from..to].to_vec(),
            inputs: k,
            outputs: to - from,
        }
    }

    /// The part of the layer that reads inputs `from..to`: its sum with the other parts' is
    /// the whole layer's output. `bias` says whether this part adds the bias.
    fn inputs(&self, from: usize, to: usize, bias: bool) -> Linear {
        let m = self.outputs;
        Linear {
            weight: self.weight[from * m..to * m].to_vec(),
            scales: self.scales.clone(),
            bias: if bias {
                self.bias.clone()
            } else {
                vec![0.0; m]
            },
            inputs: to - from,
            outputs: m,
        }
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

/// A layer in two halves, each of which one thread can compute alone: the sum of the halves'
/// outputs is the layer's (see [`Encoder::half`] and [`Encoder::merge`]).
struct Layer {
    attention: [Attention; 2],
    attention_norm: Norm,
    feed_forward: [FeedForward; 2],
    output_norm: Norm,
}

/// Half of a layer's attention: some of its heads (their query, key and value columns), and
/// the rows of the output projection that read those heads' context.
struct Attention {
    heads: usize,
    query: Linear,
    key: Linear,
    value: Linear,
    out: Linear,
}

/// Half of a layer's feed-forward block: half the intermediate columns, and the rows of the
/// output projection that read them.
struct FeedForward {
    intermediate: Linear,
    output: Linear,
}

/// An int8 matrix borrowed from the weights file, read a row at a time.
struct Rows<'a> {
    values: &'a [u8],
    scales: Vec<f32>,
    width: usize,
}

impl Rows<'_> {
    fn add_row(&self, row: usize, out: &mut [f32]) {
        let scale = self.scales[row];
        let values = &self.values[row * self.width..(row + 1) * self.width];
        for (o, &v) in out.iter_mut().zip(values) {
            *o += f32::from(v as i8) * scale;
        }
    }
}

/// The integer dot product of two int8 vectors (vectorised by the compiler, and compiled with
/// optimisations in every profile).
pub fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

/// The dot products of `query` with each `query.len()`-wide row of `rows`, into `out` (cleared
/// first): a memory's similarity scan over every entry. With AVX-512 VNNI (`vpdpbusd`, 64
/// products an instruction) or AVX2 where the CPU has them; [`dot_i8`] a row at a time
/// elsewhere. The same sums either way (exact integers).
pub fn dots_i8(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
    out.clear();
    let dims = query.len();
    if dims == 0 {
        return;
    }
    out.reserve(rows.len() / dims);
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if dims.is_multiple_of(64) && has!("avx512f") && has!("avx512bw") && has!("avx512vnni") {
            // SAFETY: the CPU has the features; the kernel reads whole rows only.
            unsafe { vnni::dots(query, rows, out) };
            return;
        }
        if dims.is_multiple_of(16) && has!("avx2") {
            // SAFETY: as above.
            unsafe { avx2_dots::dots(query, rows, out) };
            return;
        }
    }
    out.extend(rows.chunks_exact(dims).map(|row| dot_i8(query, row)));
}

#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::*;

    /// `vpdpbusd` multiplies unsigned bytes by signed ones, so the query is shifted into
    /// unsigned range (`q + 128`, a flip of the sign bit) and `128 × Σ row` taken off again
    /// (the row's sum comes from a second `vpdpbusd` against ones).
    ///
    /// # Safety
    /// The CPU must have AVX-512F, BW and VNNI; `query.len()` is a multiple of 64.
    #[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
    pub unsafe fn dots(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
        let dims = query.len();
        let flip = _mm512_set1_epi8(i8::MIN);
        let shifted: Vec<__m512i> = query
            .chunks_exact(64)
            .map(|q| _mm512_xor_si512(_mm512_loadu_si512(q.as_ptr().cast()), flip))
            .collect();
        let ones = _mm512_set1_epi8(1);
        for row in rows.chunks_exact(dims) {
            let mut products = _mm512_setzero_si512();
            let mut sums = _mm512_setzero_si512();
            for (q, v) in shifted.iter().zip(row.chunks_exact(64)) {
                let v = _mm512_loadu_si512(v.as_ptr().cast());
                products = _mm512_dpbusd_epi32(products, *q, v);
                sums = _mm512_dpbusd_epi32(sums, ones, v);
            }
            out.push(_mm512_reduce_add_epi32(_mm512_sub_epi32(
                products,
                _mm512_slli_epi32(sums, 7),
            )));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2_dots {
    use std::arch::x86_64::*;

    /// Sixteen bytes at a time, widened to i16 and multiplied and paired by `vpmaddwd`.
    ///
    /// # Safety
    /// The CPU must have AVX2; `query.len()` is a multiple of 16.
    #[target_feature(enable = "avx2")]
    pub unsafe fn dots(query: &[i8], rows: &[i8], out: &mut Vec<i32>) {
        let dims = query.len();
        let wide: Vec<__m256i> = query
            .chunks_exact(16)
            .map(|q| _mm256_cvtepi8_epi16(_mm_loadu_si128(q.as_ptr().cast())))
            .collect();
        for row in rows.chunks_exact(dims) {
            let mut acc = _mm256_setzero_si256();
            for (q, v) in wide.iter().zip(row.chunks_exact(16)) {
                let v = _mm256_cvtepi8_epi16(_mm_loadu_si128(v.as_ptr().cast()));
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(*q, v));
            }
            let half = _mm_add_epi32(
                _mm256_castsi256_si128(acc),
                _mm256_extracti128_si256(acc, 1),
            );
            let half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b01_00_11_10));
            let half = _mm_add_epi32(half, _mm_shuffle_epi32(half, 0b10_11_00_01));
            out.push(_mm_cvtsi128_si32(half));
        }
    }
}

/// The encoder.
pub struct Encoder<'a> {
    words: Rows<'a>,
    positions: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
    eps: f32,
    max_positions: usize,
    kernel: Kernel,
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

struct File<'a> {
    tensors: SafeTensors<'a>,
}

impl<'a> File<'a> {
    fn f32(&self, name: &str, len: usize) -> Result<Vec<f32>, LoadError> {
        let t = self
            .tensors
            .tensor(name)
            .map_err(|_| err(format!("the weights lack `{name}`")))?;
        if t.dtype() != Dtype::F32 || t.shape().iter().product::<usize>() != len {
            return Err(err(format!("`{name}` is not {len} f32 values")));
        }
        Ok(f32s(t.data()))
    }

    /// An int8 matrix and its per-row scales: (values, scales, columns).
    fn int8(&self, name: &str, rows: usize) -> Result<(&'a [u8], Vec<f32>, usize), LoadError> {
        let t = self
            .tensors
            .tensor(name)
            .map_err(|_| err(format!("the weights lack `{name}`")))?;
        let shape = t.shape();
        if t.dtype() != Dtype::I8 || shape.len() != 2 || shape[0] != rows {
            return Err(err(format!(
                "`{name}` is not an int8 matrix of {rows} rows"
            )));
        }
        let scales = self.f32(&format!("{name}.scale"), rows)?;
        Ok((t.data(), scales, shape[1]))
    }

    fn widened(&self, name: &str, rows: usize, columns: usize) -> Result<Vec<f32>, LoadError> {
        let (values, scales, width) = self.int8(name, rows)?;
        if width != columns {
            return Err(err(format!("`{name}` has {width} columns, not {columns}")));
        }
        let mut out = Vec::with_capacity(rows * columns);
        for (row, scale) in values.chunks_exact(columns).zip(&scales) {
            out.extend(row.iter().map(|&v| f32::from(v as i8) * scale));
        }
        Ok(out)
    }

    fn linear(&self, prefix: &str, inputs: usize, outputs: usize) -> Result<Linear, LoadError> {
        let name = format!("{prefix}.weight");
        let (values, scales, width) = self.int8(&name, outputs)?;
        if width != inputs {
            return Err(err(format!("`{name}` has {width} columns, not {inputs}")));
        }
        let mut weight = vec![0i8; inputs * outputs];
        for (o, row) in values.chunks_exact(inputs).enumerate() {
            for (i, &v) in row.iter().enumerate() {
                weight[i * outputs + o] = v as i8;
            }
        }
        Ok(Linear {
            weight,
            scales,
            bias: self.f32(&format!("{prefix}.bias"), outputs)?,
            inputs,
            outputs,
        })
    }

    fn norm(&self, prefix: &str, width: usize) -> Result<Norm, LoadError> {
        Ok(Norm {
            weight: self.f32(&format!("{prefix}.weight"), width)?,
            bias: self.f32(&format!("{prefix}.bias"), width)?,
        })
    }
}

impl<'a> Encoder<'a> {
    /// Loads an encoder from a weights file's bytes (see the crate's documentation).
    pub fn load(bytes: &'a [u8]) -> Result<Encoder<'a>, LoadError> {
        let (_, metadata) = SafeTensors::read_metadata(bytes)
            .map_err(|e| err(format!("not a safetensors file: {e}")))?;
        let meta = metadata.metadata().clone().unwrap_or_default();
        let number = |key: &str| -> Result<usize, LoadError> {
            meta.get(key)
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| err(format!("the weights' metadata lacks `{key}`")))
        };
        let layers = number("num_hidden_layers")?;
        let heads = number("num_attention_heads")?;
        let hidden = number("hidden_size")?;
        let intermediate = number("intermediate_size")?;
        let eps: f32 = meta
            .get("layer_norm_eps")
            .and_then(|v| v.parse().ok())
            .unwrap_or(1e-12);
        if heads == 0 || hidden % heads != 0 {
            return Err(err("the hidden size is not a multiple of the heads"));
        }
        let file = File {
            tensors: SafeTensors::deserialize(bytes)
                .map_err(|e| err(format!("not a safetensors file: {e}")))?,
        };
        let word_rows = file
            .tensors
            .tensor("embeddings.word_embeddings.weight")
            .map_err(|_| err("the weights lack the token table"))?
            .shape()[0];
        let (values, scales, width) = file.int8("embeddings.word_embeddings.weight", word_rows)?;
        if width != hidden {
            return Err(err("the token table's width is not the hidden size"));
        }
        let position_rows = file
            .tensors
            .tensor("embeddings.position_embeddings.weight")
            .map_err(|_| err("the weights lack the position table"))?
            .shape()[0];
        let positions = file.widened(
            "embeddings.position_embeddings.weight",
            position_rows,
            hidden,
        )?;
        let token_type = file.f32("embeddings.token_type_embeddings.weight", 2 * hidden)?;
        let mut stack = Vec::with_capacity(layers);
        // The halves: the first takes half the heads (rounded down) and half the
        // intermediate columns, and adds the output projections' biases.
        let first_heads = heads / 2;
        let cut = first_heads * (hidden / heads);
        let wide_cut = intermediate / 2;
        for i in 0..layers {
            let p = format!("encoder.layer.{i}");
            let query = file.linear(&format!("{p}.attention.self.query"), hidden, hidden)?;
            let key = file.linear(&format!("{p}.attention.self.key"), hidden, hidden)?;
            let value = file.linear(&format!("{p}.attention.self.value"), hidden, hidden)?;
            let out = file.linear(&format!("{p}.attention.output.dense"), hidden, hidden)?;
            let attention = |from: usize, to: usize, heads: usize, first: bool| Attention {
                heads,
                query: query.columns(from, to),
                key: key.columns(from, to),
                value: value.columns(from, to),
                out: out.inputs(from, to, first),
            };
            let up = file.linear(&format!("{p}.intermediate.dense"), hidden, intermediate)?;
            let down = file.linear(&format!("{p}.output.dense"), intermediate, hidden)?;
            let feed_forward = |from: usize, to: usize, first: bool| FeedForward {
                intermediate: up.columns(from, to),
                output: down.inputs(from, to, first),
            };
            stack.push(Layer {
                attention: [
                    attention(0, cut, first_heads, true),
                    attention(cut, hidden, heads - first_heads, false),
                ],
                attention_norm: file.norm(&format!("{p}.attention.output.LayerNorm"), hidden)?,
                feed_forward: [
                    feed_forward(0, wide_cut, true),
                    feed_forward(wide_cut, intermediate, false),
                ],
                output_norm: file.norm(&format!("{p}.output.LayerNorm"), hidden)?,
            });
        }
        Ok(Encoder {
            words: Rows {
                values,
                scales,
                width,
            },
            positions,
            token_type: token_type[..hidden].to_vec(),
            embedding_norm: file.norm("embeddings.LayerNorm", hidden)?,
            layers: stack,
            heads,
            hidden,
            eps,
            max_positions: position_rows,
            kernel: Kernel::detect(),
        })
    }

    /// The width of a sentence vector.
    pub fn dims(&self) -> usize {
        self.hidden
    }

    /// The most tokens one call reads (the position table's length), `[CLS]` and `[SEP]`
    /// included.
    pub fn max_tokens(&self) -> usize {
        self.max_positions
    }

    /// The tokens' hidden states averaged (the sentence-transformers "mean" pooling), not
    /// normalised. `ids` is the whole input, `[CLS]` and `[SEP]` included, at most
    /// [`Encoder::max_tokens`] long (longer inputs are cut); an id outside the token table
    /// reads as token 0.
    pub fn encode(&self, ids: &[u32]) -> Vec<f32> {
        self.run(ids, None)
    }

    fn run(&self, ids: &[u32], helper: Option<&'static Encoder<'static>>) -> Vec<f32> {
        let n = ids.len().min(self.max_positions);
        let h = self.hidden;
        if n == 0 {
            return vec![0.0; h];
        }
        let rows = self.words.scales.len();
        let mut x = vec![0f32; n * h];
        for (t, &id) in ids[..n].iter().enumerate() {
            let row = &mut x[t * h..(t + 1) * h];
            row.copy_from_slice(&self.positions[t * h..(t + 1) * h]);
            for (r, &v) in row.iter_mut().zip(&self.token_type) {
                *r += v;
            }
            let id = if (id as usize) < rows { id as usize } else { 0 };
            self.words.add_row(id, row);
        }
        norm_rows(&mut x, &self.embedding_norm, h, self.eps);
        let blocks = 2 * self.layers.len();
        let [mut first, mut second] = [Scratch::new(n, self), Scratch::new(n, self)];
        let shared = helper.map(|encoder| {
            let shared = Arc::new(Shared {
                board: Board::default(),
                x: RwLock::new((0, Vec::new())),
            });
            let theirs = Arc::clone(&shared);
            // A detached thread, so this one never waits for it to start or to end: on a busy
            // machine it may get a core only after the text is done, and then just leaves.
            let started = std::thread::Builder::new()
                .name("car-encoder-helper".into())
                .spawn(move || encoder.help(&theirs, n));
            (shared, started.is_ok())
        });
        match shared {
            Some((shared, true)) => {
                *shared.x.write().unwrap_or_else(|e| e.into_inner()) = (0, std::mem::take(&mut x));
                let board = &shared.board;
                let _leaving = board.leave();
                let mut halves = [&mut first, &mut second];
                for block in 0..blocks {
                    let (layer, kind) = self.block(block);
                    board.publish(block);
                    let mut mine = [false; 2];
                    let mut took = Duration::ZERO;
                    {
                        let guard = shared.x.read().unwrap_or_else(|e| e.into_inner());
                        let x = &guard.1;
                        while let Some(which) = board.claim(block) {
                            let started = Instant::now();
                            self.half(layer, kind, which, x, n, halves[which]);
                            took = took.max(started.elapsed());
                            mine[which] = true;
                        }
                        for which in 0..2 {
                            if !mine[which] && !board.receive(block, which, took, halves[which]) {
                                self.half(layer, kind, which, x, n, halves[which]);
                            }
                        }
                    }
                    let mut x = shared.x.write().unwrap_or_else(|e| e.into_inner());
                    let [a, b] = &mut halves;
                    self.merge(layer, kind, &mut x.1, n, a, b);
                    // Now the input of the next block (a helper's late claim sees it is not).
                    x.0 = block + 1;
                }
                let mut done = shared.x.write().unwrap_or_else(|e| e.into_inner());
                x = std::mem::take(&mut done.1);
                done.0 = usize::MAX;
            }
            _ => {
                for block in 0..blocks {
                    let (layer, kind) = self.block(block);
                    self.half(layer, kind, 0, &x, n, &mut first);
                    self.half(layer, kind, 1, &x, n, &mut second);
                    self.merge(layer, kind, &mut x, n, &first, &second);
                }
            }
        }
        let mut pooled = vec![0f32; h];
        for row in x.chunks_exact(h) {
            for (p, v) in pooled.iter_mut().zip(row) {
                *p += v;
            }
        }
        for p in &mut pooled {
            *p /= n as f32;
        }
        pooled
    }

    /// Block `i` of the forward pass: layer `i / 2`'s attention, then its feed-forward block.
    fn block(&self, i: usize) -> (&Layer, Block) {
        let kind = if i.is_multiple_of(2) {
            Block::Attention
        } else {
            Block::FeedForward
        };
        (&self.layers[i / 2], kind)
    }

    /// One half (`which`, 0 or 1) of a layer's block, from `x` into `s.partial`. The halves
    /// read only `x` and write only their own scratch, so two threads can compute them at once.
    fn half(
        &self,
        layer: &Layer,
        block: Block,
        which: usize,
        x: &[f32],
        n: usize,
        s: &mut Scratch,
    ) {
        match block {
            Block::Attention => self.attention(&layer.attention[which], x, n, s),
            Block::FeedForward => self.feed_forward(&layer.feed_forward[which], x, n, s),
        }
    }

    /// The block's output: both halves' sums added to the residual `x`, then normed.
    fn merge(
        &self,
        layer: &Layer,
        block: Block,
        x: &mut [f32],
        n: usize,
        a: &Scratch,
        b: &Scratch,
    ) {
        let len = n * self.hidden;
        for ((v, p), q) in x[..len].iter_mut().zip(&a.partial).zip(&b.partial) {
            *v += p + q;
        }
        let norm = match block {
            Block::Attention => &layer.attention_norm,
            Block::FeedForward => &layer.output_norm,
        };
        norm_rows(x, norm, self.hidden, self.eps);
    }

    /// Half the heads' attention, projected: `s.partial` (n × hidden).
    fn attention(&self, part: &Attention, x: &[f32], n: usize, s: &mut Scratch) {
        let width = self.hidden / self.heads;
        let wide = part.heads * width;
        part.query.apply(self.kernel, x, n, &mut s.q, &mut s.strip);
        part.key.apply(self.kernel, x, n, &mut s.k, &mut s.strip);
        part.value.apply(self.kernel, x, n, &mut s.v, &mut s.strip);
        let scale = 1.0 / (width as f32).sqrt();
        for head in 0..part.heads {
            let offset = head * width;
            // scores = Q_h · K_hᵀ × scale (n × n)
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    width,
                    n,
                    scale,
                    s.q[offset..].as_ptr(),
                    wide as isize,
                    1,
                    s.k[offset..].as_ptr(),
                    1,
                    wide as isize,
                    0.0,
                    s.scores.as_mut_ptr(),
                    n as isize,
                    1,
                );
            }
            for row in s.scores[..n * n].chunks_exact_mut(n) {
                softmax(row);
            }
            // context_h = probs · V_h (n × width), into its columns of the context
            unsafe {
                matrixmultiply::sgemm(
                    n,
                    n,
                    width,
                    1.0,
                    s.scores.as_ptr(),
                    n as isize,
                    1,
                    s.v[offset..].as_ptr(),
                    wide as isize,
                    1,
                    0.0,
                    s.context[offset..].as_mut_ptr(),
                    wide as isize,
                    1,
                );
            }
        }
        part.out
            .apply(self.kernel, &s.context, n, &mut s.partial, &mut s.strip);
    }

    /// Half the feed-forward block: `s.partial` (n × hidden).
    fn feed_forward(&self, part: &FeedForward, x: &[f32], n: usize, s: &mut Scratch) {
        part.intermediate
            .apply(self.kernel, x, n, &mut s.wide, &mut s.strip);
        for v in &mut s.wide[..n * part.intermediate.outputs] {
            *v = gelu(*v);
        }
        part.output
            .apply(self.kernel, &s.wide, n, &mut s.partial, &mut s.strip);
    }
}

impl Encoder<'static> {
    /// [`Encoder::encode`] on two threads, for one text's wait: a helper thread claims halves
    /// of each block while this one computes the rest (the crate's documentation). The same
    /// vector, bit for bit. On a machine with one core, or for a text of a few tokens,
    /// [`Encoder::encode`] itself.
    pub fn encode_on_two_threads(&'static self, ids: &[u32]) -> Vec<f32> {
        static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let cores =
            *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
        let helper = (cores >= 2 && ids.len() >= TWO_THREADS_FROM).then_some(self);
        self.run(ids, helper)
    }

    /// The helper's side of [`Encoder::encode_on_two_threads`]: claims halves of the open
    /// block, computes each from a copy of the hidden states, and hands the sums over, until
    /// the calling thread is done.
    fn help(&self, shared: &Shared, n: usize) {
        let board = &shared.board;
        let _leaving = board.leave();
        let mut own: Option<Scratch> = None;
        let mut input = Vec::new();
        let mut idle = 0u32;
        loop {
            match board.claim_any() {
                Claim::Half(block, which) => {
                    {
                        let x = shared.x.read().unwrap_or_else(|e| e.into_inner());
                        if x.0 != block {
                            // Claimed too late: the caller computed it and moved on.
                            continue;
                        }
                        input.clear();
                        input.extend_from_slice(&x.1);
                    }
                    let own = own.get_or_insert_with(|| Scratch::new(n, self));
                    let (layer, kind) = self.block(block);
                    self.half(layer, kind, which, &input, n, own);
                    board.deliver(block, which, &own.partial[..n * self.hidden]);
                    idle = 0;
                }
                Claim::Stop => return,
                Claim::Nothing => pause(&mut idle),
            }
        }
    }
}

/// What the calling thread and the helper share: the board, and the hidden states with the
/// block they are the input of (`usize::MAX` once the caller has taken them back).
struct Shared {
    board: Board,
    x: RwLock<(usize, Vec<f32>)>,
}

/// Texts shorter than this (in tokens, `[CLS]` and `[SEP]` included) are encoded on one
/// thread by [`Encoder::encode_on_two_threads`]: their halves are too short to share.
const TWO_THREADS_FROM: usize = 6;

/// The two halves of a layer's block: attention, or the feed-forward block after it.
#[derive(Clone, Copy)]
enum Block {
    Attention,
    FeedForward,
}

/// What the two threads of [`Encoder::encode_on_two_threads`] share: the block being computed
/// and how many of its halves are claimed (one word, so a late claim cannot take a half of
/// the next block; a late claim of this one finds the input moved on, see [`Shared`]), the
/// helper's last result, and whether either thread has left.
struct Board {
    /// `block << 2 | claimed`.
    state: AtomicUsize,
    /// `(block << 1 | which) + 1` of the half in `result`, 0 before the first.
    delivered: AtomicUsize,
    result: Mutex<Vec<f32>>,
    stopped: AtomicBool,
}

impl Default for Board {
    fn default() -> Board {
        Board {
            // Block 0 with both halves taken: nothing to claim until the first publish.
            state: AtomicUsize::new(2),
            delivered: AtomicUsize::new(0),
            result: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
        }
    }
}

enum Claim {
    Half(usize, usize),
    Nothing,
    Stop,
}

fn tag(block: usize, which: usize) -> usize {
    (block << 1 | which) + 1
}

impl Board {
    /// Opens `block`'s two halves to claims.
    fn publish(&self, block: usize) {
        self.state.store(block << 2, Ordering::Release);
    }

    /// A half of `block`, if one is unclaimed.
    fn claim(&self, block: usize) -> Option<usize> {
        let mut state = self.state.load(Ordering::Acquire);
        loop {
            let claimed = state & 3;
            if state >> 2 != block || claimed >= 2 {
                return None;
            }
            match self.state.compare_exchange_weak(
                state,
                state + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(claimed),
                Err(now) => state = now,
            }
        }
    }

    /// The helper's look at the board: a half of the open block, nothing yet, or the end.
    fn claim_any(&self) -> Claim {
        if self.stopped.load(Ordering::Acquire) {
            return Claim::Stop;
        }
        let block = self.state.load(Ordering::Acquire) >> 2;
        match self.claim(block) {
            Some(which) => Claim::Half(block, which),
            None => Claim::Nothing,
        }
    }

    /// The helper hands over a half's sums.
    fn deliver(&self, block: usize, which: usize, partial: &[f32]) {
        let mut result = self.result.lock().unwrap_or_else(|e| e.into_inner());
        result.clear();
        result.extend_from_slice(partial);
        self.delivered.store(tag(block, which), Ordering::Release);
    }

    /// Takes the helper's sums for `block`'s half `which` into `s.partial`, waiting for them
    /// at most about `patience`; false when they did not come (the caller computes them).
    fn receive(&self, block: usize, which: usize, patience: Duration, s: &mut Scratch) -> bool {
        let wanted = tag(block, which);
        let started = Instant::now();
        let mut idle = 0u32;
        while self.delivered.load(Ordering::Acquire) != wanted {
            if started.elapsed() > patience.max(Duration::from_micros(20)) {
                return false;
            }
            pause(&mut idle);
        }
        let result = self.result.lock().unwrap_or_else(|e| e.into_inner());
        if self.delivered.load(Ordering::Acquire) != wanted {
            return false;
        }
        s.partial[..result.len()].copy_from_slice(&result);
        true
    }

    /// A guard that stops the helper when its thread leaves, by returning or by a panic.
    fn leave(&self) -> Leaving<'_> {
        Leaving(self)
    }
}

struct Leaving<'a>(&'a Board);

impl Drop for Leaving<'_> {
    fn drop(&mut self) {
        self.0.stopped.store(true, Ordering::Release);
    }
}

/// A wait that spins for a few microseconds, then yields the core (to the other thread, when
/// both share one).
fn pause(idle: &mut u32) {
    *idle = idle.saturating_add(1);
    if *idle < 256 {
        std::hint::spin_loop();
    } else {
        std::thread::yield_now();
    }
}

/// One half's working space.
struct Scratch {
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    context: Vec<f32>,
    scores: Vec<f32>,
    wide: Vec<f32>,
    /// The half's sum for the residual (n × hidden).
    partial: Vec<f32>,
    /// A strip of weights widened to f32 (see [`strips`]).
    strip: Vec<f32>,
}

impl Scratch {
    fn new(n: usize, encoder: &Encoder<'_>) -> Scratch {
        let width = encoder.hidden / encoder.heads;
        let heads = encoder.heads - encoder.heads / 2;
        let wide = encoder.layers.iter().fold(0, |w, l| {
            l.feed_forward
                .iter()
                .fold(w, |w, f| w.max(f.intermediate.outputs))
        });
        Scratch {
            q: vec![0.0; n * heads * width],
            k: vec![0.0; n * heads * width],
            v: vec![0.0; n * heads * width],
            context: vec![0.0; n * heads * width],
            scores: vec![0.0; n * n],
            wide: vec![0.0; n * wide],
            partial: vec![0.0; n * encoder.hidden],
            strip: Vec::new(),
        }
    }
}

/// How the dense layers' products are computed: the fastest this CPU runs, chosen at load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// AVX-512 BF16: two products a lane per instruction, the activations rounded to bf16 (the
    /// int8 weights are exact in it); within cosine 0.99999 of [`Kernel::Plain`] (tested).
    Bf16,
    /// AVX-512F, f32.
    Avx512,
    /// AVX2 and FMA, f32.
    Avx2,
    /// Any CPU: one sum at a time.
    Plain,
}

impl Kernel {
    fn detect() -> Kernel {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx512f") && has!("avx512bf16") {
                return Kernel::Bf16;
            }
            if has!("avx512f") {
                return Kernel::Avx512;
            }
            if has!("avx2") && has!("fma") {
                return Kernel::Avx2;
            }
        }
        Kernel::Plain
    }

    /// The kernels this CPU can run.
    #[cfg(test)]
    fn available() -> Vec<Kernel> {
        let all = [Kernel::Bf16, Kernel::Avx512, Kernel::Avx2, Kernel::Plain];
        let best = all.iter().position(|&k| k == Kernel::detect()).unwrap_or(3);
        // A CPU with AVX-512 has AVX2 and FMA; one with BF16 has AVX-512F.
        all[best..].to_vec()
    }
}

impl Linear {
    /// `out[..n × outputs] = x[..n × inputs] · Wᵀ + b` with `kernel` (one [`Kernel::detect`]
    /// returned); `strip` is scratch space.
    fn apply(&self, kernel: Kernel, x: &[f32], n: usize, out: &mut [f32], strip: &mut Vec<f32>) {
        let (k, m) = (self.inputs, self.outputs);
        assert!(x.len() >= n * k && out.len() >= n * m);
        assert!(self.weight.len() == k * m && self.scales.len() == m && self.bias.len() == m);
        if m == 0 || n == 0 {
            return;
        }
        let out = &mut out[..n * m];
        for row in out.chunks_exact_mut(m) {
            row.copy_from_slice(&self.bias);
        }
        if k == 0 {
            return;
        }
        let (x, w, scales) = (&x[..n * k], &self.weight[..], &self.scales[..]);
        // SAFETY (each kernel): `kernel` came from `Kernel::detect`, so the CPU has the
        // features the kernel is compiled for; the asserts above keep every access inside its
        // slice.
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Bf16 if k % 2 == 0 => unsafe { bf16::product(x, w, scales, k, m, out, strip) },
            #[cfg(target_arch = "x86_64")]
            Kernel::Bf16 | Kernel::Avx512 => unsafe {
                avx512::product(x, w, scales, k, m, out, strip)
            },
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => unsafe { avx2::product(x, w, scales, k, m, out, strip) },
            _ => product_plain(x, w, scales, k, m, out, 0),
        }
    }
}

/// `out[.., from..] += (x · w) × scales` one sum at a time (`x`: n × k f32, `w`: k × m int8,
/// `out`: n × m, all row-major).
fn product_plain(
    x: &[f32],
    w: &[i8],
    scales: &[f32],
    k: usize,
    m: usize,
    out: &mut [f32],
    from: usize,
) {
    let mut sums = vec![0f32; m - from];
    for (xr, or) in x.chunks_exact(k).zip(out.chunks_exact_mut(m)) {
        sums.fill(0.0);
        for (i, &a) in xr.iter().enumerate() {
            for (s, &b) in sums.iter_mut().zip(&w[i * m + from..(i + 1) * m]) {
                *s += a * f32::from(b);
            }
        }
        for ((o, s), scale) in or[from..].iter_mut().zip(&sums).zip(&scales[from..]) {
            *o += s * scale;
        }
    }
}

/// Walks `out` (n × m) in strips of `lanes` columns: the strip of `w` (k × lanes int8) is
/// widened once into `strip` (k × lanes f32, which stays in cache), then every block of rows
/// reads it: `block(strip, rows, row, column)`, blocks of four rows, then one row at a time.
/// Columns that fill no strip are summed one at a time. The int8 weights are a quarter of the
/// f32 ones: a short text's products are bound by reading the weights, not by the arithmetic.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn strips(
    x: &[f32],
    w: &[i8],
    scales: &[f32],
    k: usize,
    m: usize,
    out: &mut [f32],
    lanes: usize,
    strip: &mut Vec<f32>,
    mut block: impl FnMut(&[f32], &mut [f32], usize, usize, usize),
) {
    let n = x.len() / k;
    assert!(w.len() >= k * m && out.len() >= n * m);
    strip.resize(k * lanes, 0.0);
    let full = m / lanes * lanes;
    let mut column = 0;
    while column < full {
        for (i, dst) in strip.chunks_exact_mut(lanes).enumerate() {
            let src = &w[i * m + column..i * m + column + lanes];
            for (d, &v) in dst.iter_mut().zip(src) {
                *d = f32::from(v);
            }
        }
        let mut row = 0;
        while row + 4 <= n {
            block(strip, out, 4, row, column);
            row += 4;
        }
        while row < n {
            block(strip, out, 1, row, column);
            row += 1;
        }
        column += lanes;
    }
    if full < m {
        product_plain(x, w, scales, k, m, out, full);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use std::arch::x86_64::*;

    /// Rows of `x` per block.
    const ROWS: usize = 4;
    /// Output columns per block: four registers of sixteen.
    const LANES: usize = 64;

    /// A block of 4 × 64 sums lives in sixteen registers while the strip's `k` rows go by.
    ///
    /// # Safety
    /// The CPU must have AVX-512F; `x` is n × k, `w` k × m, `scales` m and `out` n × m.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn product(
        x: &[f32],
        w: &[i8],
        scales: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
        strip: &mut Vec<f32>,
    ) {
        super::strips(
            x,
            w,
            scales,
            k,
            m,
            out,
            LANES,
            strip,
            |strip, out, rows, row, column| {
                if rows == ROWS {
                    block::<ROWS>(x, strip, scales, k, m, out, row, column);
                } else {
                    block::<1>(x, strip, scales, k, m, out, row, column);
                }
            },
        );
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const R: usize>(
        x: &[f32],
        strip: &[f32],
        scales: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
        row: usize,
        column: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        let wp = strip.as_ptr();
        let xp = x.as_ptr().add(row * k);
        for i in 0..k {
            let wr = wp.add(i * LANES);
            let w0 = _mm512_loadu_ps(wr);
            let w1 = _mm512_loadu_ps(wr.add(16));
            let w2 = _mm512_loadu_ps(wr.add(32));
            let w3 = _mm512_loadu_ps(wr.add(48));
            for (r, acc) in acc.iter_mut().enumerate() {
                let a = _mm512_set1_ps(*xp.add(r * k + i));
                acc[0] = _mm512_fmadd_ps(a, w0, acc[0]);
                acc[1] = _mm512_fmadd_ps(a, w1, acc[1]);
                acc[2] = _mm512_fmadd_ps(a, w2, acc[2]);
                acc[3] = _mm512_fmadd_ps(a, w3, acc[3]);
            }
        }
        add_scaled(&acc, scales, out, m, row, column);
    }

    /// `out[row + r][column..column + 64] += acc[r] × scales[column..column + 64]`: a block's
    /// sums, scaled back from the int8 weights, into the output (the bf16 kernel's too).
    #[inline(always)]
    pub(super) unsafe fn add_scaled<const R: usize>(
        acc: &[[__m512; 4]; R],
        scales: &[f32],
        out: &mut [f32],
        m: usize,
        row: usize,
        column: usize,
    ) {
        let sp = scales.as_ptr().add(column);
        for (r, acc) in acc.iter().enumerate() {
            let op = out.as_mut_ptr().add((row + r) * m + column);
            for (j, sum) in acc.iter().enumerate() {
                let o = op.add(j * 16);
                let scale = _mm512_loadu_ps(sp.add(j * 16));
                _mm512_storeu_ps(o, _mm512_fmadd_ps(*sum, scale, _mm512_loadu_ps(o)));
            }
        }
    }
}

/// The bf16 bits of `v` (its f32 bits' high half), rounded to nearest even.
#[inline(always)]
fn to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// The product with AVX-512 BF16's `vdpbf16ps`: each f32 lane adds the products of a pair of
/// bf16s, so a block of 4 × 64 sums takes half the instructions of [`avx512`]'s. The weights
/// are int8, exact in bf16; the activations are rounded to bf16 (8 bits of mantissa), the sums
/// kept in f32.
#[cfg(target_arch = "x86_64")]
mod bf16 {
    use std::arch::x86_64::*;

    /// Output columns per block: four registers of sixteen.
    const LANES: usize = 64;

    /// Like [`super::strips`], with the strip widened to bf16 pairs: for inputs `2p` and
    /// `2p + 1`, each output column's two weights side by side in one 32-bit lane.
    ///
    /// # Safety
    /// The CPU must have AVX-512F and AVX-512 BF16; `k` is even; `x` is n × k, `w` k × m,
    /// `scales` m and `out` n × m.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub unsafe fn product(
        x: &[f32],
        w: &[i8],
        scales: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
        strip: &mut Vec<f32>,
    ) {
        let n = x.len() / k;
        // x as bf16 pairs: n × k/2 lanes.
        let xb: Vec<u32> = x
            .chunks_exact(2)
            .map(|p| u32::from(super::to_bf16(p[0])) | (u32::from(super::to_bf16(p[1])) << 16))
            .collect();
        // The strip: k/2 pairs × 64 columns × 2 bf16s, in the room of k × 32 f32s.
        strip.resize(k * LANES / 2, 0.0);
        let sb = strip.as_mut_ptr() as *mut u16;
        let full = m / LANES * LANES;
        let mut column = 0;
        while column < full {
            // An int8 value's f32 has its low 16 bits zero and its bf16 in the high 16: a
            // lane of the pair is the first row's value shifted down, or'd with the second's.
            for p in 0..k / 2 {
                let r0 = w.as_ptr().add(2 * p * m + column);
                let r1 = w.as_ptr().add((2 * p + 1) * m + column);
                let dst = sb.add(p * LANES * 2) as *mut __m512i;
                for q in 0..LANES / 16 {
                    let a = _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                        _mm_loadu_si128(r0.add(16 * q) as *const __m128i),
                    )));
                    let b = _mm512_castps_si512(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                        _mm_loadu_si128(r1.add(16 * q) as *const __m128i),
                    )));
                    _mm512_storeu_si512(dst.add(q), _mm512_or_si512(_mm512_srli_epi32(a, 16), b));
                }
            }
            let mut row = 0;
            while row + 4 <= n {
                block::<4>(&xb, sb, scales, k, m, out, row, column);
                row += 4;
            }
            while row < n {
                block::<1>(&xb, sb, scales, k, m, out, row, column);
                row += 1;
            }
            column += LANES;
        }
        if full < m {
            super::product_plain(x, w, scales, k, m, out, full);
        }
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const R: usize>(
        xb: &[u32],
        sb: *const u16,
        scales: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
        row: usize,
        column: usize,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 4]; R];
        let half = k / 2;
        let xp = xb.as_ptr().add(row * half);
        for p in 0..half {
            let wr = sb.add(p * LANES * 2) as *const __m512i;
            let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(wr));
            let w1: __m512bh = std::mem::transmute(_mm512_loadu_si512(wr.add(1)));
            let w2: __m512bh = std::mem::transmute(_mm512_loadu_si512(wr.add(2)));
            let w3: __m512bh = std::mem::transmute(_mm512_loadu_si512(wr.add(3)));
            for (r, acc) in acc.iter_mut().enumerate() {
                let a: __m512bh =
                    std::mem::transmute(_mm512_set1_epi32(*xp.add(r * half + p) as i32));
                acc[0] = _mm512_dpbf16_ps(acc[0], a, w0);
                acc[1] = _mm512_dpbf16_ps(acc[1], a, w1);
                acc[2] = _mm512_dpbf16_ps(acc[2], a, w2);
                acc[3] = _mm512_dpbf16_ps(acc[3], a, w3);
            }
        }
        super::avx512::add_scaled(&acc, scales, out, m, row, column);
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// Rows of `x` per block.
    const ROWS: usize = 4;
    /// Output columns per block: three registers of eight.
    const LANES: usize = 24;

    /// A block of 4 × 24 sums lives in twelve registers while the strip's `k` rows go by.
    ///
    /// # Safety
    /// The CPU must have AVX2 and FMA; `x` is n × k, `w` k × m, `scales` m and `out` n × m.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn product(
        x: &[f32],
        w: &[i8],
        scales: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
        strip: &mut Vec<f32>,
    ) {
        super::strips(
            x,
            w,
            scales,
            k,
            m,
            out,
            LANES,
            strip,
            |strip, out, rows, row, column| {
                if rows == ROWS {
                    block::<ROWS>(x, strip, scales, k, m, out, row, column);
                } else {
                    block::<1>(x, strip, scales, k, m, out, row, column);
                }
            },
        );
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn block<const R: usize>(
        x: &[f32],
        strip: &[f32],
        scales: &[f32],
        k: usize,
        m: usize,
        out: &mut [f32],
        row: usize,
        column: usize,
    ) {
        let mut acc = [[_mm256_setzero_ps(); 3]; R];
        let wp = strip.as_ptr();
        let xp = x.as_ptr().add(row * k);
        for i in 0..k {
            let wr = wp.add(i * LANES);
            let w0 = _mm256_loadu_ps(wr);
            let w1 = _mm256_loadu_ps(wr.add(8));
            let w2 = _mm256_loadu_ps(wr.add(16));
            for (r, acc) in acc.iter_mut().enumerate() {
                let a = _mm256_broadcast_ss(&*xp.add(r * k + i));
                acc[0] = _mm256_fmadd_ps(a, w0, acc[0]);
                acc[1] = _mm256_fmadd_ps(a, w1, acc[1]);
                acc[2] = _mm256_fmadd_ps(a, w2, acc[2]);
            }
        }
        let sp = scales.as_ptr().add(column);
        for (r, acc) in acc.iter().enumerate() {
            let op = out.as_mut_ptr().add((row + r) * m + column);
            for (j, sum) in acc.iter().enumerate() {
                let o = op.add(j * 8);
                let scale = _mm256_loadu_ps(sp.add(j * 8));
                _mm256_storeu_ps(o, _mm256_fmadd_ps(*sum, scale, _mm256_loadu_ps(o)));
            }
        }
    }
}

fn norm_rows(x: &mut [f32], norm: &Norm, width: usize, eps: f32) {
    for row in x.chunks_exact_mut(width) {
        let mean = row.iter().sum::<f32>() / width as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(&norm.weight).zip(&norm.bias) {
            *v = (*v - mean) * inv * w + b;
        }
    }
}

fn softmax(row: &mut [f32]) {
    let max = row.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    let mut sum = 0.0;
    for v in row.iter_mut() {
        *v = (*v - max).exp();
        sum += *v;
    }
    for v in row.iter_mut() {
        *v /= sum;
    }
}

/// GELU with the exact error function (BERT's `gelu`).
fn gelu(x: f32) -> f32 {
    0.5 * x * (1.0 + erf(x / std::f32::consts::SQRT_2))
}

/// The error function (Abramowitz and Stegun 7.1.26, absolute error < 1.5e-7).
fn erf(x: f32) -> f32 {
    let sign = if x < 0.0 { -1.0 } else { 1.0 };
    let x = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let y = 1.0
        - (((((1.061_405_4 * t - 1.453_152_1) * t) + 1.421_413_7) * t - 0.284_496_74) * t
            + 0.254_829_6)
            * t
            * (-x * x).exp();
    sign * y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_matches_known_values() {
        for (x, want) in [
            (0.0, 0.0),
            (0.5, 0.520_499_9),
            (1.0, 0.842_700_8),
            (-2.0, -0.995_322_3),
        ] {
            assert!((erf(x) - want).abs() < 1e-6, "erf({x}) = {}", erf(x));
        }
    }

    /// Every kernel this CPU runs gives the plain kernel's vectors, for texts whose rows fill
    /// blocks of four and leave some over.
    #[test]
    fn every_kernel_gives_the_plain_kernels_vectors() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../assets/embed/encoder.safetensors"
        );
        let bytes = std::fs::read(path).expect("the model in assets/embed");
        let mut encoder = Encoder::load(&bytes).unwrap();
        for n in [1, 3, 8, 13, 70] {
            let ids: Vec<u32> = (0..n as u32).map(|i| 101 + i * 997 % 29_000).collect();
            encoder.kernel = Kernel::Plain;
            let want = encoder.encode(&ids);
            for kernel in Kernel::available() {
                encoder.kernel = kernel;
                let got = encoder.encode(&ids);
                let dot: f32 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
                let norms = got.iter().map(|v| v * v).sum::<f32>().sqrt()
                    * want.iter().map(|v| v * v).sum::<f32>().sqrt();
                let cosine = dot / norms;
                let floor = if kernel == Kernel::Bf16 {
                    0.9999
                } else {
                    0.999_999
                };
                assert!(cosine > floor, "{kernel:?}, {n} tokens: cosine {cosine}");
            }
        }
    }

    /// Two threads give one thread's vector bit for bit, with every kernel, for texts whose
    /// rows fill blocks of four and leave some over; and both run the halves concurrently
    /// from several callers at once.
    #[test]
    fn two_threads_give_one_threads_vector_exactly() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../assets/embed/encoder.safetensors"
        );
        let bytes: &'static [u8] = std::fs::read(path)
            .expect("the model in assets/embed")
            .leak();
        for kernel in Kernel::available() {
            let mut encoder = Encoder::load(bytes).unwrap();
            encoder.kernel = kernel;
            let encoder: &'static Encoder<'static> = Box::leak(Box::new(encoder));
            for n in [1, 2, 3, 8, 13, 70] {
                let ids: Vec<u32> = (0..n as u32).map(|i| 101 + i * 997 % 29_000).collect();
                let one = encoder.encode(&ids);
                let two = encoder.encode_on_two_threads(&ids);
                assert_eq!(one, two, "{kernel:?}, {n} tokens");
            }
        }
        let encoder: &'static Encoder<'static> = Box::leak(Box::new(Encoder::load(bytes).unwrap()));
        std::thread::scope(|scope| {
            let callers: Vec<_> = (0..4u32)
                .map(|c| {
                    scope.spawn(move || {
                        let ids: Vec<u32> = (0..9 + c).map(|i| 2000 + i * 31 + c).collect();
                        (encoder.encode(&ids), encoder.encode_on_two_threads(&ids))
                    })
                })
                .collect();
            for caller in callers {
                let (one, two) = caller.join().unwrap();
                assert_eq!(one, two);
            }
        });
    }

    /// The vectorised scan gives [`dot_i8`]'s sums, extremes included, for widths each kernel
    /// takes and one none does.
    #[test]
    fn the_scan_gives_each_rows_dot_product() {
        let mut seed = 7u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed as i8
        };
        for dims in [384, 64, 48, 100] {
            let mut query: Vec<i8> = (0..dims).map(|_| next()).collect();
            let mut rows: Vec<i8> = (0..dims * 50).map(|_| next()).collect();
            query[0] = i8::MIN;
            rows[0] = i8::MIN;
            rows[dims..2 * dims].fill(i8::MIN);
            rows[2 * dims..3 * dims].fill(i8::MAX);
            let mut got = vec![1, 2, 3];
            dots_i8(&query, &rows, &mut got);
            let want: Vec<i32> = rows.chunks_exact(dims).map(|r| dot_i8(&query, r)).collect();
            assert_eq!(got, want, "{dims} dimensions");
        }
    }

    #[test]
    fn a_file_without_weights_is_refused_with_a_reason() {
        assert!(Encoder::load(b"not weights").is_err());
    }
}
